"""The builder forms (`dim`, `range`, `role`, `cdiv`, ...): the compiler evaluates them itself,
so they have no registry entry; their signatures and docs live here for the index (a call of
a form is a call site), hovers, signature help and completion.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FormSignature:
    """A builder form: evaluated by the compiler, so it has no registry entry."""

    name: str
    params: tuple[str, ...]
    doc: str

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


FORMS: dict[str, FormSignature] = {f.name: f for f in (
    FormSignature("dim", ("name", "multiple_of=1", "max=None"),
                  "A size known at launch, not at compile time: `M = dim(\"M\")`. "
                  "`multiple_of` states a divisibility fact the verifier may rely on."),
    FormSignature("cdiv", ("a", "b"), "Ceiling division of ints; folds when both are constants."),
    FormSignature("min", ("a", "b", "..."), "The smallest of two or more ints (folded)."),
    FormSignature("max", ("a", "b", "..."), "The largest of two or more ints (folded)."),
    FormSignature("range", ("start", "stop", "step=1"),
                  "The iteration space of a `for` loop or a role's warps: `range(stop)` or "
                  "`range(start, stop[, step])`; the step is a positive constant."),
    FormSignature("sm_count", (),
                  "The SM count of the device the kernel is launched on: a launch-time size "
                  "like a dim, supplied by the device (the launcher asks the driver; the "
                  "simulator uses 2 unless `sm_count=` is given). Persistent grids: "
                  "`grid=(min(sm_count(), ntiles),)`."),
    FormSignature("tile_coords", ("tile", "tiles_m", "tiles_n", "group=8", 'raster="m"'),
                  "(tile_m, tile_n) of a linear tile index in a grouped raster order: bands "
                  "of `group` tiles along `raster`, that axis fastest, for L2 reuse. A "
                  "bijection onto the tile grid, ragged last band included."),
    FormSignature("role", ("name", "warps=range(first, stop)", "regs=None"),
                  "A warp role: the warps that run the block under it, and optionally the "
                  "registers per thread they keep (setmaxnreg)."),
    FormSignature("elect_one", (),
                  "`with elect_one():` runs the block in one fixed thread, the role's thread 0 "
                  "(the one that issues its TMA); bulk-store and cp.async groups committed "
                  "inside belong to that thread."),
    FormSignature("kernel", ("arch", "grid", "warps=4", "cluster=(1,)"),
                  "The decorator of a kernel: target arch, launch grid, warps per block."),
    FormSignature("swizzle", ("span", 'order="row"'),
                  "An XOR-swizzled smem layout of 32, 64 or 128-byte rows (as TMA and wgmma "
                  "read them); removes bank conflicts without padding."),
    FormSignature("padded", ("n",), "A row-major smem layout with `n` padding elements per row."),
    FormSignature("Tensor", ("dtype", "shape"),
                  "A kernel parameter in global memory: `Tensor[bf16, (M, K)]`."),
)}


__all__ = ["FORMS", "FormSignature"]
