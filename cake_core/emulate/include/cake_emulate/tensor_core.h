// Tensor-core and matrix-load instructions from the PTX ISA, not from the lowering:
// ldmatrix (9.7.14.5.15), stmatrix (9.7.14.5.16), mma.sync m16n8k16 (9.7.14.5.8, fragment layouts of its
// figures), wgmma.mma_async with shared-memory descriptors (9.7.15.5.1: start address,
// leading and stride byte offsets, swizzle mode) and the m64nNk* accumulator layout
// (9.7.15.5.1.1 "Register fragments"), and setmaxnreg (9.7.19.8) with the block's
// register pool checked.
#pragma once

namespace cake_emu {

inline float elem_f32(const unsigned char* p, int kind) {
  switch (kind) {
    case 0: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case 1: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case 2: return fp8_to_f32<4, 3, 7>(*p, false);
    default: return fp8_to_f32<5, 2, 15>(*p, true);
  }
}

// The fragment mappings below are named functions, used by the emulation and by the tests
// that compare them with an independent layout library (tests/emulate).
struct Coord { int row, col; };

// ---- ldmatrix ---------------------------------------------------------------------------------
// Lane l supplies the address of row l % 8 of matrix l / 8; register i of lane l receives
// row l / 4, elements 2 * (l % 4) and +1 of matrix i (transposed: column l / 4, rows
// 2 * (l % 4) and +1).
// Half j (0 low, 1 high) of any register of `lane`: its (row, column) in that register's 8x8
// matrix.
inline Coord ldmatrix_coord(int lane, int j, bool trans) {
  if (!trans) return {lane / 4, 2 * (lane % 4) + j};
  return {2 * (lane % 4) + j, lane / 4};
}

inline void ldmatrix(uint32_t* r, uint32_t addr, int nmat, bool trans, Loc loc) {
  Thread& t = cur();
  Block& b = blk();
  const auto* all = warp_exchange(&addr, 4, trans ? "ldmatrix.trans" : "ldmatrix", loc);
  const int lane = t.tid % 32;
  for (int i = 0; i < nmat; ++i) {
    uint16_t e[2];
    for (int j = 0; j < 2; ++j) {
      const auto [row, col] = ldmatrix_coord(lane, j, trans);
      uint32_t ra;
      std::memcpy(&ra, all[i * 8 + row], 4);
      if (ra % 16 != 0) fail("smem_bounds", fmt("ldmatrix row address %u is not 16-byte aligned",
                                                ra - SMEM_BASE), loc);
      const uint32_t a = ra + 2u * static_cast<uint32_t>(col);
      const unsigned char* p = smem_at(b, a, 2, "ldmatrix", loc);
      check_init(b, a, 2, "ldmatrix", loc);
      std::memcpy(&e[j], p, 2);
    }
    r[i] = static_cast<uint32_t>(e[0]) | (static_cast<uint32_t>(e[1]) << 16);
  }
}

// ---- stmatrix (9.7.14.5.16) ------------------------------------------------------------------
// The mirror of ldmatrix: lane l supplies the address of row l % 8 of matrix l / 8; register i
// of lane l holds the elements ldmatrix_coord(l, j, trans) of matrix i, which that lane writes
// (generic-proxy writes of the lane's thread: it is the one that must fence them).
inline void stmatrix(uint32_t addr, const uint32_t* r, int nmat, bool trans, Loc loc) {
  Thread& t = cur();
  Block& b = blk();
  const auto* all = warp_exchange(&addr, 4, trans ? "stmatrix.trans" : "stmatrix", loc);
  const int lane = t.tid % 32;
  for (int i = 0; i < nmat; ++i) {
    for (int j = 0; j < 2; ++j) {
      const auto [row, col] = ldmatrix_coord(lane, j, trans);
      uint32_t ra;
      std::memcpy(&ra, all[i * 8 + row], 4);
      if (ra % 16 != 0) fail("smem_bounds", fmt("stmatrix row address %u is not 16-byte aligned",
                                                ra - SMEM_BASE), loc);
      const uint32_t a = ra + 2u * static_cast<uint32_t>(col);
      unsigned char* p = smem_at(b, a, 2, "stmatrix", loc);
      const uint16_t e = static_cast<uint16_t>(r[i] >> (16 * j));
      mark_generic_write(b, a, 2);
      std::memcpy(p, &e, 2);
    }
  }
}

// ---- mma.sync m16n8k16, A row-major, B column-major, f32 accumulators -----------------------
// groupID g = lane / 4, t = lane % 4.  A: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
// a3 (g+8, 2t+8..).  B: b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g).  C/D: d0,d1 (g, 2t..2t+1),
// d2,d3 (g+8, 2t..2t+1).
// Where one operand element lives: the lane, the register (a0..a3, b0..b1) and its half.
struct FragSlot { int lane, reg, half; };

inline FragSlot mma_a_slot(int row, int k) {
  return {(row % 8) * 4 + (k % 8) / 2, (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0), k % 2};
}
inline FragSlot mma_b_slot(int k, int n) { return {n * 4 + (k % 8) / 2, k >= 8 ? 1 : 0, k % 2}; }
// Accumulator d[i] of `lane`: its (row, column) in the 16x8 tile.
inline Coord mma_c_coord(int lane, int i) {
  return {lane / 4 + (i >= 2 ? 8 : 0), 2 * (lane % 4) + (i % 2)};
}

inline void mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* bfrag, int kind, Loc loc) {
  uint32_t mine[6] = {a[0], a[1], a[2], a[3], bfrag[0], bfrag[1]};
  const auto* all = warp_exchange(mine, sizeof mine, "mma.sync", loc);
  auto half_of = [&](int lane, int reg, int which) {
    uint32_t w[6];
    std::memcpy(w, all[lane], sizeof w);
    const uint16_t h = static_cast<uint16_t>(w[reg] >> (16 * which));
    unsigned char bytes[2];
    std::memcpy(bytes, &h, 2);
    return elem_f32(bytes, kind);
  };
  auto A = [&](int row, int k) {
    const FragSlot s = mma_a_slot(row, k);
    return half_of(s.lane, s.reg, s.half);
  };
  auto B = [&](int k, int n) {
    const FragSlot s = mma_b_slot(k, n);
    return half_of(s.lane, 4 + s.reg, s.half);
  };
  const int lane = cur().tid % 32;
  for (int i = 0; i < 4; ++i) {
    const auto [row, col] = mma_c_coord(lane, i);
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[i] = acc;
  }
}

// ---- wgmma --------------------------------------------------------------------------------------
struct Desc { uint32_t start, lbo, sbo; int base_offset, span; };

inline Desc decode_desc(uint64_t d, Loc loc) {
  Desc out;
  out.start = static_cast<uint32_t>(d & 0x3FFFu) << 4;
  out.lbo = static_cast<uint32_t>((d >> 16) & 0x3FFFu) << 4;
  out.sbo = static_cast<uint32_t>((d >> 32) & 0x3FFFu) << 4;
  out.base_offset = static_cast<int>((d >> 49) & 7u);
  const int mode = static_cast<int>(d >> 62);
  out.span = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  if (out.base_offset != 0) {
    fail("fault", "wgmma descriptor with a nonzero base offset (operands must start at a "
                  "multiple of the swizzle repeat)", loc);
  }
  return out;
}

// Byte address of (row, k-byte) of a K-major operand: swizzled modes place 8-row groups
// `sbo` apart with rows one span apart inside a group, the K bytes of a row contiguous (a
// wgmma's K extent fits in one span); the interleaved mode (no swizzle) places 8x16-byte
// core matrices `sbo` apart along M/N and `lbo` apart along K.
inline uint32_t operand_addr(const Desc& d, int row, int kbyte) {
  if (d.span == 0) {
    return d.start + static_cast<uint32_t>(row / 8) * d.sbo + static_cast<uint32_t>(kbyte / 16) * d.lbo +
           static_cast<uint32_t>(row % 8) * 16u + static_cast<uint32_t>(kbyte % 16);
  }
  const uint32_t a = d.start + static_cast<uint32_t>(row / 8) * d.sbo +
                     static_cast<uint32_t>(row % 8) * static_cast<uint32_t>(d.span) +
                     static_cast<uint32_t>(kbyte);
  return swizzle_addr(a, d.span);
}

inline int kind_bytes(int kind) { return kind < 2 ? 2 : 1; }

// Accumulator register i of warpgroup thread t (0..127): its (row, column) in the 64xN tile.
inline Coord wgmma_acc_coord(int t, int i) {
  const int w = t / 32, l = t % 32;
  return {16 * w + l / 4 + 8 * ((i / 2) % 2), (i / 4) * 8 + (l % 4) * 2 + (i % 2)};
}

// Run one warpgroup MMA: D (64 x N, f32) += A (64 x K) * B (N x K)^T, both K-major in smem.
inline void wgmma_execute(Block& b, WgmmaOp& op) {
  const int eb = kind_bytes(op.kind), K = 32 / eb;
  const Desc da = op.a_regs ? Desc{} : decode_desc(op.desc_a, op.loc), db = decode_desc(op.desc_b, op.loc);
  std::vector<float> A(64 * K), B(static_cast<size_t>(op.n) * K);
  auto load = [&](const Desc& d, int rows, std::vector<float>& out) {
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < K; ++k) {
        const uint32_t a = operand_addr(d, r, k * eb);
        const unsigned char* p = smem_at(b, a, eb, "wgmma operand", op.loc);
        check_init(b, a, eb, "wgmma operand", op.loc);
        check_fenced(b, a, eb, "wgmma operand", op.loc);
        out[static_cast<size_t>(r) * K + k] = elem_f32(p, op.kind);
      }
    }
  };
  if (op.a_regs) {
    // A fragment (PTX ISA 9.7.15.5.2): element (row, k) of the 64x16 tile is half
    // (k % 2) of register (2 * (k / 8) + (row % 16) / 8) of the thread whose accumulator
    // of a 16-column tile holds that coordinate: warp row / 16, lane 4 * (row % 8) + (k % 8) / 2.
    for (int r = 0; r < 64; ++r) {
      for (int k = 0; k < K; ++k) {
        const int t = 32 * (r / 16) + 4 * (r % 8) + (k % 8) / 2;
        const uint32_t w = op.ra[t][2 * (k / 8) + (r % 16) / 8];
        const uint16_t h = static_cast<uint16_t>(w >> (16 * (k % 2)));
        unsigned char bytes[2];
        std::memcpy(bytes, &h, 2);
        A[static_cast<size_t>(r) * K + k] = elem_f32(bytes, op.kind);
      }
    }
  } else {
    load(da, 64, A);
  }
  load(db, op.n, B);
  for (int t = 0; t < 128; ++t) {
    float* acc = op.acc[t];
    for (int i = 0; i < op.n / 2; ++i) {
      const auto [row, col] = wgmma_acc_coord(t, i);
      float s = op.scale_d ? acc[i] : 0.0f;
      for (int k = 0; k < K; ++k) s += A[static_cast<size_t>(row) * K + k] * B[static_cast<size_t>(col) * K + k];
      acc[i] = s;
    }
  }
  op.done = true;
}

inline Warpgroup& my_wg(Loc loc, const char* what) {
  Thread& t = cur();
  Block& b = blk();
  const size_t w = static_cast<size_t>(t.tid / 128);
  if (w >= b.wgs.size() || (w + 1) * 128 > b.threads.size()) {
    fail("collective", fmt("%s needs a whole warpgroup (128 threads)", what), loc);
  }
  return b.wgs[w];
}

// `a_regs`: this thread's four A registers when A comes from registers (desc_a unused).
// `scale_d` 0: the group overwrites d instead of adding to it (PTX's scale-d operand).
inline void wgmma(float* d, uint64_t desc_a, uint64_t desc_b, int n, int kind, Loc loc,
                  const uint32_t* a_regs = nullptr, int scale_d = 1) {
  Thread& t = cur();
  Warpgroup& wg = my_wg(loc, "wgmma");
  const uint64_t seq = t.wgmma_issued++;
  auto it = wg.ops.find(seq);
  if (it == wg.ops.end()) {
    WgmmaOp op;
    op.seq = seq; op.n = n; op.kind = kind; op.desc_a = desc_a; op.desc_b = desc_b; op.loc = loc;
    op.a_regs = a_regs != nullptr;
    op.scale_d = scale_d != 0;
    it = wg.ops.emplace(seq, op).first;
  } else {
    WgmmaOp& op = it->second;
    if (op.n != n || op.kind != kind || op.desc_a != desc_a || op.desc_b != desc_b ||
        op.a_regs != (a_regs != nullptr) || op.scale_d != (scale_d != 0)) {
      fail("collective", fmt("threads of one warpgroup issued different wgmma (this one and "
                             "the one at %s): shape, descriptors or scale-d differ", where(op.loc).c_str()),
           loc);
    }
  }
  WgmmaOp& op = it->second;
  op.acc[t.tid % 128] = d;
  if (a_regs != nullptr) std::memcpy(op.ra[t.tid % 128], a_regs, sizeof op.ra[0]);
  ++op.issued;
  t.wgmma_open.push_back(seq);
  if ((g_launch->flags & EAGER) && op.issued == 128) wgmma_execute(blk(), op);
}

inline void wgmma_commit() {
  Thread& t = cur();
  t.wgmma_groups.push_back(std::move(t.wgmma_open));
  t.wgmma_open.clear();
}

// wgmma.wait_group N: all but the newest N committed groups of this thread are complete.
// An op executes once the whole warpgroup issued it, when the first of its threads waits.
inline void wgmma_wait(int n, Loc loc) {
  Thread& t = cur();
  Warpgroup& wg = my_wg(loc, "wgmma.wait_group");
  Block& b = blk();
  preempt(loc);
  while (static_cast<int>(t.wgmma_groups.size()) > n) {
    for (uint64_t seq : t.wgmma_groups.front()) {
      WgmmaOp* op = &wg.ops.at(seq);
      if (!op->done) {
        block_until([op] { return op->issued == 128; },
                    [op] { return fmt("the other threads of its warpgroup to issue the wgmma at "
                                      "%s (%d of 128 issued)", where(op->loc).c_str(),
                                      op->issued); }, loc);
        if (!op->done) wgmma_execute(b, *op);
      }
    }
    t.wgmma_groups.erase(t.wgmma_groups.begin());
  }
}

// ---- setmaxnreg -----------------------------------------------------------------------------------
inline void setmaxnreg(int regs, bool inc, Loc loc) {
  Thread& t = cur();
  Block& b = blk();
  Warpgroup& wg = my_wg(loc, "setmaxnreg");
  if (regs < 24 || regs > 256 || regs % 8 != 0) {
    fail("setmaxnreg", fmt("setmaxnreg %d: the count must be a multiple of 8 in 24..256", regs),
         loc);
  }
  const char z = 0;
  warpgroup_exchange(&z, 1, inc ? "setmaxnreg.inc" : "setmaxnreg.dec", loc);
  const int launch = g_launch->launch_regs;
  if (launch == 0) return;  // launched without a known per-thread count: nothing to budget
  const uint64_t target = ++t.wg_coll;
  if (t.tid % 128 == 0) {
    const int current = wg.regs ? wg.regs : (launch + 7) / 8 * 8;
    if (inc ? regs < current : regs > current) {
      fail("setmaxnreg", fmt("setmaxnreg.%s %d from %d registers per thread", inc ? "inc" : "dec",
                             regs, current), loc);
    }
    auto used = [&b, launch] {
      int64_t s = 0;
      for (auto& w : b.wgs) s += static_cast<int64_t>(w.regs ? w.regs : (launch + 7) / 8 * 8) * 128;
      return s;
    };
    // registers are allocated per thread in units of 8 (a launch bound of 255 holds 256)
    const int64_t pool = static_cast<int64_t>((launch + 7) / 8 * 8) *
                         static_cast<int64_t>(b.threads.size());
    Warpgroup* wp = &wg;
    const int64_t need = static_cast<int64_t>(regs - current) * 128;
    block_until([used, pool, need] { return used() + need <= pool; },
                [used, pool, regs] {
                  return fmt("setmaxnreg.inc to %d: the block's %lld registers are all held "
                             "(%lld in use)", regs, static_cast<long long>(pool),
                             static_cast<long long>(used()));
                }, loc);
    wp->regs = regs;
    wp->setmax_done = target;
  } else {
    Warpgroup* wp = &wg;
    block_until([wp, target] { return wp->setmax_done >= target; },
                [] { return std::string("its warpgroup's setmaxnreg"); }, loc);
  }
}

}  // namespace cake_emu
