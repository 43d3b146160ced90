"""wgmma helpers (sm_90a): descriptors, fences, commit and wait, and one
`wgmma.mma_async` helper per (N, dtype) a kernel uses, written on demand.
"""

from __future__ import annotations

from cake_core.ir.types import DType

TEXT = r"""
// ---- wgmma (PTX ISA 9.7.15) -------------------------------------------------------------
#ifndef CAKE_WGMMA_HELPERS
#define CAKE_WGMMA_HELPERS
// Shared-memory matrix descriptor (PTX ISA 9.7.15.5.1, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4         bits 16-29  leading dimension byte offset >> 4
//   bits 32-45  stride dimension byte offset >> 4
//   bits 49-51  base offset (0: every operand starts at a multiple of the swizzle repeat)
//   bits 62-63  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
// K-major swizzled operands: rows of one swizzle span, 8-row groups `sbo` = 8 * span bytes
// apart; the leading offset is unused (the K extent of one wgmma fits in the span) and set
// to 1, as CUTLASS does.  Successive K steps advance the start address inside the span.
__host__ __device__ __forceinline__ uint64_t cake_wgmma_desc(uint32_t addr, uint32_t lbo,
                                                             uint32_t sbo, uint32_t mode) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4)
       | (static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16)
       | (static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32)
       | (static_cast<uint64_t>(mode) << 62);
}
// Two 16-bit elements as one .b32 register, the lower-indexed one in the low half: the
// packing of a wgmma A operand held in registers (PTX ISA 9.7.15.5.2).
__device__ __forceinline__ uint32_t cake_pack_16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}
__device__ __forceinline__ uint32_t cake_pack_16x2(__half lo, __half hi) {
  return static_cast<uint32_t>(__half_as_ushort(lo)) |
         (static_cast<uint32_t>(__half_as_ushort(hi)) << 16);
}
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ void cake_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void cake_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cake_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Pin accumulator registers at this point of the program: no read or write of them
// moves across an in-flight wgmma (CUTLASS's warpgroup_fence_operand).
template <int N>
__device__ __forceinline__ void cake_fence_regs(float (&r)[N]) {
  CAKE_FOR(i, N) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N>
__device__ __forceinline__ void cake_fence_regs(uint32_t (&r)[N]) {
  CAKE_FOR(i, N) asm volatile("" : "+r"(r[i]) :: "memory");
}

#endif  // CAKE_EMULATE
#endif
"""


#: wgmma input dtype -> (PTX type, K per instruction)
WGMMA_TYPES = {DType.BF16: ("bf16", 16), DType.F16: ("f16", 16), DType.E4M3: ("e4m3", 32),
               DType.E5M2: ("e5m2", 32)}


def wgmma_helper_name(n: int, dtype: DType) -> str:
    ptx, k = WGMMA_TYPES[dtype]
    return f"cake_wgmma_m64n{n}k{k}_{ptx}"


def wgmma_helper(n: int, dtype: DType) -> str:
    """One `wgmma.mma_async` with both operands from smem descriptors, K-major, and for
    16-bit inputs its twin with A from registers (`_rs`).

    Operand order (PTX ISA 9.7.15.5.2): d, a-desc, b-desc, scale-d, imm-scale-a,
    imm-scale-b[, imm-trans-a, imm-trans-b] (16-bit types only have the transpose flags;
    0 = K-major).  scale-d 1 accumulates into d, 0 overwrites it.  With A in registers,
    `a` is a vector of four .b32 registers and only imm-trans-b remains.

    Each comes twice: with `scale_d` a run-time flag (d is read and written, `+f`), and as
    `_zd` with scale-d 0 and d write-only (`=f`), so the compiler sees that the values d
    held before are dead and drops the moves that cleared them.
    """
    ptx, k = WGMMA_TYPES[dtype]
    name = wgmma_helper_name(n, dtype)
    trans = ", 0, 0" if k == 16 else ""
    text = "".join(_helper(name + zd, n, k, ptx, f"%{n // 2}, %{n // 2 + 1}",
                           '"l"(desc_a), "l"(desc_b)', "uint64_t desc_a, uint64_t desc_b",
                           trans, zero=bool(zd)) for zd in ("", "_zd"))
    if k == 16:
        a = ", ".join(f"%{n // 2 + i}" for i in range(4))
        text += "".join(_helper(name + "_rs" + zd, n, k, ptx, f"{{{a}}}, %{n // 2 + 4}",
                                '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)',
                                "uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, "
                                "uint64_t desc_b", ", 0", zero=bool(zd))
                        for zd in ("", "_zd"))
    return text


def _helper(name: str, n: int, k: int, ptx: str, operands: str, inputs: str, params: str,
            trans: str, *, zero: bool) -> str:
    regs = n // 2
    flag = inputs.count('"') // 2 + regs  # the operand number of scale-d
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"{"=" if zero else "+"}f"(d[{i}])' for i in range(regs))
    setp = f"setp.ne.b32 p, {0 if zero else f'%{flag}'}, 0;"
    extra = "" if zero else ", int scale_d = 1"
    ins = inputs if zero else f'{inputs}, "r"(scale_d)'
    return f"""
#if !defined(CAKE_HELPER_{name.upper()}) && !defined(CAKE_EMULATE)
#define CAKE_HELPER_{name.upper()}
__device__ __forceinline__ void {name}(float* d, {params}{extra}) {{
  asm volatile(
      "{{\\n\\t.reg .pred p;\\n\\t{setp}\\n\\t"
      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx}.{ptx} {{{d}}}, {operands}, "
      "p, 1, 1{trans};\\n\\t}}"
      : {outs}
      : {ins});
}}
#endif
"""
