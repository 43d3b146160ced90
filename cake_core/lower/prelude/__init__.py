"""The CUDA helpers every generated file carries: one small inline function per instruction.

Generated kernels call these instead of spelling inline PTX at every use, so each op of a
kernel lowers to one readable line.  The helpers are grouped by hardware feature, one
module per group holding its text (`TEXT`), and only the groups a kernel uses are
written, in `ORDER`.  Every PTX string has been assembled by ptxas 13.0 for the archs
that use it; the comments cite the PTX ISA sections whose semantics they rely on.
"""

from __future__ import annotations

from cake_core.ir.types import DType
from cake_core.lower.prelude import (
    cluster,
    common,
    cp_async,
    ldmatrix,
    mbarrier,
    mma,
    setmaxnreg,
    stmatrix,
    tma,
    wgmma,
)
from cake_core.lower.prelude.wgmma import WGMMA_TYPES, wgmma_helper, wgmma_helper_name

#: Under `-DCAKE_EMULATE` a host C++ compiler builds the same kernel and launcher text against
#: the CPU runtime (cake_core/emulate/include) instead of the CUDA headers and these helpers.
EMULATE_INCLUDE = """\
#ifdef CAKE_EMULATE
#include "cake_emulate.h"  // the CPU runtime (docs/emulation.md): the PTX helpers, emulated
#else"""

#: After the prelude: under emulation, calls of its plain-C++ helpers record their .cake line.
EMULATE_SITES = """
#ifdef CAKE_EMULATE
#include "cake_emulate/sites.h"
#endif
"""

HEADER = """\
#include <cuda.h>            // CUtensorMap and its enums (types only: nothing links -lcuda)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>
"""

#: Feature group (the names facets add to `ctx.features`) -> its helpers.
GROUPS = {"common": common.TEXT, "mbarrier": mbarrier.TEXT, "tma": tma.TEXT,
          "cp_async": cp_async.TEXT, "ldmatrix": ldmatrix.TEXT, "stmatrix": stmatrix.TEXT,
          "mma": mma.TEXT,
          "wgmma": wgmma.TEXT, "setmaxnreg": setmaxnreg.TEXT, "cluster": cluster.TEXT}
ORDER = ("common", "mbarrier", "tma", "cp_async", "ldmatrix", "stmatrix", "mma", "wgmma",
         "setmaxnreg", "cluster")


def render_prelude(groups: set[str], wgmma_shapes: set[tuple[int, DType]]) -> str:
    """The helpers of `groups` (common always) and one wgmma helper per (N, dtype)."""
    parts = [GROUPS[g] for g in ORDER if g == "common" or g in groups]
    for n, dt in sorted(wgmma_shapes, key=lambda x: (x[1].value, x[0])):
        parts.append(wgmma_helper(n, dt))
    return "".join(parts)


__all__ = ["EMULATE_INCLUDE", "EMULATE_SITES", "GROUPS", "HEADER", "ORDER", "WGMMA_TYPES",
           "render_prelude", "wgmma_helper", "wgmma_helper_name"]
