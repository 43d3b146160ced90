"""The host side of a lowered kernel: a size-contract check, a launcher and metadata.

`cake_launch_<kernel>(params..., dims..., stream)` takes the kernel's tensor and scalar
parameters in declaration order, then its dims, then the stream.  It first checks the
kernel's size contract (no dim negative, each `max=` and `multiple_of=` kept) and returns
`cudaErrorInvalidValue` without touching the device when the dims break it: a kernel
declared for M <= 64 would otherwise write 64 rows of a larger M and report success.
`cake_contract_error_<kernel>(dims...)` is that check on its own, for a caller who wants to
know which rule failed.  The launcher then encodes the tensor maps (`cuTensorMapEncodeTiled`,
fetched with `cudaGetDriverEntryPointByVersion` so nothing links libcuda), computes the grid
from the dims, opts in to the kernel's dynamic shared memory and launches.  The metadata
(kernel name, parameters, grid expressions, block, shared memory, tensor maps) is written
both as an `extern "C"` JSON string in the .cu and as a JSON file next to it, so a Python
runner needs no C++ parsing.
"""

from __future__ import annotations

import json
from typing import Any

from cake_core.ir.symbolic import SM_COUNT, BinExpr, Const, Dim, SymExpr
from cake_core.ir.types import ScalarType, TensorType
from cake_core.lower.context import CTYPE, TMAP_DTYPE, TmapSpec
from cake_core.lower.kernel import KernelCode

SCHEMA = "cake.lower/1"

HOST_HELPERS = r"""
// ---- host helpers ------------------------------------------------------------------------
#ifndef CAKE_HOST_HELPERS
#define CAKE_HOST_HELPERS
#include <cudaTypedefs.h>   // PFN_cuTensorMapEncodeTiled

// cuTensorMapEncodeTiled through the runtime's driver entry point: no -lcuda needed.
inline cudaError_t cake_encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype,
                                     cuuint32_t rank, const void* base, const cuuint64_t* dims,
                                     const cuuint64_t* strides, const cuuint32_t* box,
                                     CUtensorMapSwizzle swizzle) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000, cudaEnableDefault,
        &found);
#else
    cudaError_t err = cudaGetDriverEntryPoint(
        "cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess) return err;
    if (found != cudaDriverEntryPointSuccess || encode == nullptr) return cudaErrorNotSupported;
  }
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  // OOB_FILL_NONE: elements outside the tensor read as zero (and are not written by stores)
  const CUresult res = encode(map, dtype, rank, const_cast<void*>(base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
#endif
"""

SM_COUNT_HELPER = r"""
// ---- the device's SM count, for `sm_count()` ----------------------------------------------
#ifndef CAKE_SM_COUNT_HELPER
#define CAKE_SM_COUNT_HELPER
// The multiprocessor count of the current device, asked once per device and cached: a
// persistent grid sizes itself by the GPU it runs on, never by a number in the text.
inline cudaError_t cake_sm_count(int* out) {
  static int cached[64] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const bool slot = device >= 0 && device < 64;
  if (slot && cached[device] > 0) { *out = cached[device]; return cudaSuccess; }
  int n = 0;
  err = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  if (n < 1) return cudaErrorNotSupported;
  if (slot) cached[device] = n;
  *out = n;
  return cudaSuccess;
}
#endif
"""

_SWIZZLE = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
            64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}


def sym_json(e: SymExpr) -> Any:
    """A launch-time expression as JSON: ints, {"dim": name}, {"op": ..., "args": [...]}."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Dim):
        return {"dim": e.name}
    assert isinstance(e, BinExpr)
    return {"op": e.op, "args": [sym_json(e.left), sym_json(e.right)]}


def launcher_params(code: KernelCode) -> list[str]:
    """The launcher's C parameters: tensors and scalars in the kernel's declaration order,
    then the dims, then the stream (the order the runner and the metadata rely on)."""
    ctx, k = code.ctx, code.kernel
    out = []
    for p in k.params:
        t = p.value.type
        if isinstance(t, TensorType):
            info = ctx.tensors[p.name]
            const = "" if info.written else "const "
            out.append(f"{const}{CTYPE[t.dtype]}* {info.cname}")
        elif isinstance(t, ScalarType):
            out.append(f"{CTYPE[t.dtype]} {ctx.scalars[p.name]}")
    out += [f"int {ctx.dims[d]}" for d in code.dim_order]
    out.append("cudaStream_t stream")
    return out


def _tmap_code(code: KernelCode, spec: TmapSpec) -> str:
    ctx = code.ctx
    info = ctx.tensors[spec.tensor]
    shape = list(reversed(info.shape))  # innermost first
    dims = ", ".join(f"(cuuint64_t){_paren(ctx.sym(e))}" for e in shape)
    strides = []
    acc = f"(cuuint64_t){info.dtype.bytes}"
    for e in shape[:-1]:
        acc = f"{acc} * {_paren(ctx.sym(e))}"
        strides.append(acc)
    stride_txt = ", ".join(strides) if strides else "0"
    box = ", ".join(str(b) for b in spec.box)
    return (f"  CUtensorMap {spec.cname};\n  {{\n"
            f"    const cuuint64_t dims[{spec.rank}] = {{{dims}}};\n"
            f"    const cuuint64_t strides[{max(1, spec.rank - 1)}] = {{{stride_txt}}};  "
            "// bytes, dims 1..\n"
            f"    const cuuint32_t box[{spec.rank}] = {{{box}}};\n"
            f"    const cudaError_t err = cake_encode_tiled(&{spec.cname}, "
            f"{TMAP_DTYPE[spec.dtype]}, {spec.rank}, {info.cname}, dims, strides, box, "
            f"{_SWIZZLE[spec.swizzle]});\n"
            "    if (err != cudaSuccess) return err;\n  }\n")


def _paren(e: str) -> str:
    return e if e.replace("_", "").isalnum() else f"({e})"


def contract_symbol(code: KernelCode) -> str:
    return f"cake_contract_error_{code.entry}"


def contract_rules(code: KernelCode) -> list[tuple[str, str]]:
    """(C condition that breaks the rule, message) per rule, in the order they are checked:
    per dim in launcher order, negative, then `multiple_of=`, then `max=` (as
    `Launchable.check_dims` checks them)."""
    out: list[tuple[str, str]] = []
    for name in code.dim_order:
        c = code.ctx.dims[name]
        out.append((f"{c} < 0", f"{name} is negative"))
        d = _dim(code.kernel, name)
        if d is None:
            continue
        if d.multiple_of > 1:
            out.append((f"{c} % {d.multiple_of} != 0",
                        f"{name} is not a multiple of {d.multiple_of}, as the kernel declares"))
        if d.max is not None:
            out.append((f"{c} > {d.max}", f"{name} exceeds the kernel's declared max {d.max}"))
    return out


def contract_check(code: KernelCode) -> str:
    """`cake_contract_error_<kernel>(dims...)`: plain host C++, no CUDA call, so it runs (and
    is tested) on a machine without a GPU or driver.  A string literal per rule keeps the
    answer valid forever and the function thread-safe, with nothing for the caller to free."""
    params = ", ".join(f"int {code.ctx.dims[d]}" for d in code.dim_order) or "void"
    lines = [f"// The size contract of `{code.kernel.name}`: nullptr when the dims keep it, else "
             "the first rule they",
             f"// break (a string literal). cake_launch_{code.entry} checks it before anything "
             "else.",
             f'extern "C" const char* {contract_symbol(code)}({params}) {{']
    lines += [f"  if ({cond}) return {_c_string(msg)};" for cond, msg in contract_rules(code)]
    lines += ["  return nullptr;", "}"]
    return "\n".join(lines)


def _c_string(text: str) -> str:
    """A C string literal: JSON's escapes of quotes, backslashes and control characters are
    C's too, and ASCII-only output needs no thought about the source encoding."""
    return json.dumps(text, ensure_ascii=True)


def launcher(code: KernelCode) -> str:
    ctx, k = code.ctx, code.kernel
    grid = [ctx.sym(g) for g in k.grid] + ["1"] * (3 - len(k.grid))
    args = [ctx.tensors[p.name].cname if isinstance(p.value.type, TensorType)
            else ctx.scalars[p.name] for p in k.params
            if isinstance(p.value.type, TensorType | ScalarType)]
    dims = [ctx.dims[d] for d in code.dim_order]
    args += [ctx.dims[d] for d in code.kernel_dims]
    args += [s.cname for s in ctx.tmaps]
    lines = [contract_check(code), "",
             f'extern "C" cudaError_t cake_launch_{code.entry}(' +
             ", ".join(launcher_params(code)) + ") {",
             f"  if ({contract_symbol(code)}({', '.join(dims)}) != nullptr) "
             "return cudaErrorInvalidValue;  // dims break the size contract: launch nothing",
             *_sm_count_lines(code),
             f"  const dim3 grid({', '.join(grid)});",
             "  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return cudaSuccess;  "
             "// nothing to do"]
    lines += [_tmap_code(code, s).rstrip("\n") for s in ctx.tmaps]
    lines += ["  // opt in to the dynamic shared memory once per device (a per-function attribute)",
              "  static bool smem_set[64] = {};",
              "  int device = 0;",
              "  cudaError_t err = cudaGetDevice(&device);",
              "  if (err != cudaSuccess) return err;",
              "  if (device < 0 || device >= 64 || !smem_set[device]) {",
              f"    err = cudaFuncSetAttribute({code.entry}, "
              f"cudaFuncAttributeMaxDynamicSharedMemorySize, {code.smem_const});",
              "    if (err != cudaSuccess) return err;",
              "    if (device >= 0 && device < 64) smem_set[device] = true;",
              "  }",
              "#ifdef CAKE_EMULATE",
              f"  return cake_emu_launch({code.entry}, grid, dim3({k.threads}), "
              f"dim3({', '.join(str(c) for c in (*k.cluster, 1, 1)[:3])}), "
              f"{code.smem_const}, {code.launch_regs or 0}, stream, " + ", ".join(args) + ");",
              "#else",
              f"  {code.entry}<<<grid, dim3({k.threads}), {code.smem_const}, stream>>>(" +
              ", ".join(args) + ");",
              "  return cudaGetLastError();", "#endif", "}"]
    return "\n".join(lines)


def _sm_count_lines(code: KernelCode) -> list[str]:
    """The launcher's `sm_count()`: the device's, asked before the grid is computed."""
    if SM_COUNT not in code.ctx.dims:
        return []
    c = code.ctx.dims[SM_COUNT]
    return [f"  int {c} = 0;  // sm_count(): the device's multiprocessor count",
            f"  {{ const cudaError_t e = cake_sm_count(&{c}); if (e != cudaSuccess) return e; }}"]


def metadata(code: KernelCode, cu_name: str) -> dict[str, Any]:
    ctx, k = code.ctx, code.kernel
    params: list[dict[str, Any]] = []
    for p in k.params:
        t = p.value.type
        if isinstance(t, TensorType):
            info = ctx.tensors[p.name]
            params.append({"name": p.name, "kind": "tensor", "dtype": t.dtype.value,
                           "shape": [sym_json(e) for e in t.shape], "written": info.written,
                           "ctype": CTYPE[t.dtype] + "*"})
        elif isinstance(t, ScalarType):
            params.append({"name": p.name, "kind": "scalar", "dtype": t.dtype.value,
                           "ctype": CTYPE[t.dtype]})
    for d in code.dim_order:
        params.append({"name": d, "kind": "dim", "ctype": "int"})
    for s in ctx.tmaps:
        params.append({"name": s.cname, "kind": "tensor_map", "tensor": s.tensor,
                       "dtype": s.dtype.value, "rank": s.rank, "box": list(s.box),
                       "swizzle": s.swizzle, "ctype": "CUtensorMap"})
    dims = {d.name: {"multiple_of": d.multiple_of, "max": d.max}
            for d in (_dim(k, n) for n in code.dim_order) if d is not None}
    roles = [{"name": r.name, "warps": [r.warp_start, r.warp_stop], "regs": r.regs,
              "single_thread": code.plan.groups[r.name].single} for r in k.roles.values()]
    return {
        "schema": SCHEMA,
        "kernel": k.name,
        "entry": code.entry,
        "launcher": f"cake_launch_{code.entry}",
        "metadata_symbol": f"cake_meta_{code.entry}",
        "contract_check": contract_symbol(code),
        "arch": k.arch,
        "source": code.emitter.cake_path,
        "cu": cu_name,
        "grid": [sym_json(g) for g in k.grid],
        "grid_c": [ctx.sym(g) for g in k.grid],
        "block": [k.threads, 1, 1],
        "warps": k.warps,
        "cluster": list(k.cluster),
        "smem_bytes": code.smem_bytes,
        "smem": ctx.smem.as_data()["placements"],
        "params": params,
        "launcher_params": [*[p["name"] for p in params if p["kind"] != "tensor_map"],
                            "stream"],
        "dims": dims,
        "roles": roles,
        "launch_regs": code.launch_regs,
        "build": {
            "cubin": f"nvcc -arch={k.arch} -cubin -std=c++17 -o {code.entry}.cubin {cu_name}",
            "shared_library": f"nvcc -gencode arch=compute_{k.arch[3:]},code={k.arch} "
                              f"-std=c++17 -shared -Xcompiler -fPIC -o lib{code.entry}.so "
                              f"{cu_name}",
        },
        "tensor_maps": [{"name": s.cname, "tensor": s.tensor, "dtype": s.dtype.value,
                         "box": list(s.box), "swizzle": s.swizzle,
                         "oob_fill": "zero", "interleave": "none", "l2_promotion": "256B"}
                        for s in ctx.tmaps],
    }


def _dim(k: Any, name: str) -> Dim | None:
    d = k.dims.get(name)
    if d is not None:
        return d
    for p in k.params:
        t = p.value.type
        if isinstance(t, TensorType):
            for e in t.shape:
                for a in e.atoms():
                    if isinstance(a, Dim) and a.name == name:
                        return a
    return None


def metadata_symbol(code: KernelCode, meta: dict[str, Any]) -> str:
    text = json.dumps(meta, separators=(",", ":"))
    return f'extern "C" const char cake_meta_{code.entry}[] = R"cakejson({text})cakejson";'


__all__ = ["HOST_HELPERS", "SCHEMA", "SM_COUNT_HELPER", "contract_check", "contract_rules",
           "contract_symbol", "launcher", "metadata", "metadata_symbol", "sym_json"]
