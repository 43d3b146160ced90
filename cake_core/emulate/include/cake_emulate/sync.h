// Synchronization: block-wide and named barriers (bar.sync / bar.arrive, PTX ISA 9.7.13.1),
// warp and warpgroup collectives, and mbarriers (PTX ISA 9.7.13.15) with their phases,
// pending-arrival and transaction counts.  Collectives rendezvous: a warp collective
// completes when all 32 lanes reached it, and lanes that reach different collectives (a
// shuffle under a lane-dependent branch) are a finding, not a silent exchange.
#pragma once

namespace cake_emu {

inline int warp_of(const Thread& t) { return t.tid / 32; }

// ---- named barriers ---------------------------------------------------------------------------
inline void bar_arrive_impl(int id, int count, bool wait, Loc loc) {
  Block& b = blk();
  if (id < 0 || id > 15) fail("barrier", fmt("barrier id %d is outside 0..15", id), loc);
  NamedBar& nb = b.bars[id];
  if (count <= 0 || count % 32 != 0) {
    fail("barrier", fmt("barrier %d: thread count %d is not a positive multiple of 32", id,
                        count), loc);
  }
  if (nb.arrived == 0) { nb.count = count; nb.first = loc; }
  else if (nb.count != count) {
    fail("barrier", fmt("barrier %d: this thread expects %d threads, %s expected %d", id, count,
                        where(nb.first).c_str(), nb.count), loc);
  }
  const uint64_t gen = nb.gen;
  if (++nb.arrived >= nb.count) { nb.arrived = 0; ++nb.gen; preempt(loc); return; }
  if (!wait) return;
  NamedBar* p = &nb;
  block_until([p, gen] { return p->gen != gen; },
              [p, id] { return fmt("barrier %d (%d of %d threads arrived)", id, p->arrived,
                                   p->count); }, loc);
}

// __syncthreads: every thread of the block that has not exited.
inline void syncthreads(const char* file, int line) {
  Loc loc{file, line};
  Block& b = blk();
  NamedBar& nb = b.bars[0];
  const uint64_t gen = nb.gen;
  ++nb.arrived;
  Block* bp = &b;
  auto done = [bp, gen] {
    NamedBar& n = bp->bars[0];
    if (n.gen != gen) return true;
    if (n.arrived >= bp->live) { n.arrived = 0; ++n.gen; return true; }
    return false;
  };
  if (done()) { preempt(loc); return; }
  block_until(done, [bp] { return fmt("__syncthreads (%d of %d live threads arrived)",
                                      bp->bars[0].arrived, bp->live); }, loc);
}

// barrier.cluster arrive + wait: every live thread of every block of the running cluster.
inline void cluster_sync(Loc loc) {
  Launch* lp = g_launch;
  NamedBar& cb = lp->cluster_bar;
  const uint64_t gen = cb.gen;
  ++cb.arrived;
  auto live = [lp] {
    int n = 0;
    for (const auto& b : lp->blocks) n += b->live;
    return n;
  };
  auto done = [lp, gen, live] {
    NamedBar& c = lp->cluster_bar;
    if (c.gen != gen) return true;
    if (c.arrived >= live()) { c.arrived = 0; ++c.gen; return true; }
    return false;
  };
  if (done()) { preempt(loc); return; }
  block_until(done, [lp, live] { return fmt("cluster_sync (%d of %d live threads of the cluster "
                                            "arrived)", lp->cluster_bar.arrived, live()); }, loc);
}

// ---- collectives ------------------------------------------------------------------------------
// Exchange `bytes` of every participant's `in`; returns the snapshot of all of them.
inline const unsigned char (*exchange(Collective& c, int slot, int participants, const void* in,
                                      size_t bytes, const char* what, Loc loc))[32] {
  if (c.arrived == 0) { c.first = loc; c.what = what; }
  else if (c.first.line != loc.line || std::strcmp(c.first.file, loc.file) != 0 ||
           std::strcmp(c.what, what) != 0) {
    fail("collective", fmt("%s: threads of one warp (or warpgroup) reached different "
                           "collectives: this one and %s at %s (a collective under a "
                           "lane- or warp-dependent condition)", what, c.what,
                           where(c.first).c_str()), loc);
  }
  std::memcpy(c.in[slot], in, bytes);
  const uint64_t gen = c.gen;
  if (++c.arrived == participants) {
    std::memcpy(c.out[gen & 1], c.in, sizeof c.in);
    c.arrived = 0;
    ++c.gen;
  } else {
    Collective* p = &c;
    block_until([p, gen] { return p->gen != gen; },
                [p, what, participants] {
                  return fmt("%s (%d of %d threads arrived)", what, p->arrived, participants);
                }, loc);
  }
  return c.out[gen & 1];
}

inline const unsigned char (*warp_exchange(const void* in, size_t bytes, const char* what,
                                           Loc loc))[32] {
  Thread& t = cur();
  return exchange(*blk().warp_coll[warp_of(t)], t.tid % 32, 32, in, bytes, what, loc);
}

inline const unsigned char (*warpgroup_exchange(const void* in, size_t bytes, const char* what,
                                                Loc loc))[32] {
  Thread& t = cur();
  if (static_cast<int>(blk().wg_coll.size()) <= t.tid / 128 ||
      (t.tid / 128 + 1) * 128 > static_cast<int>(blk().threads.size())) {
    fail("collective", fmt("%s needs a whole warpgroup (128 threads); the block has %zu "
                           "threads", what, blk().threads.size()), loc);
  }
  return exchange(*blk().wg_coll[t.tid / 128], t.tid % 128, 128, in, bytes, what, loc);
}

inline void syncwarp(const char* file, int line) {
  const char z = 0;
  warp_exchange(&z, 1, "__syncwarp", {file, line});
}

template <typename T>
inline T shfl_xor(T v, int mask, Loc loc) {
  static_assert(sizeof(T) <= 32, "shuffled values are at most 32 bytes");
  const auto* all = warp_exchange(&v, sizeof(T), "a warp shuffle", loc);
  T out;
  std::memcpy(&out, all[(cur().tid % 32) ^ (mask & 31)], sizeof(T));
  return out;
}

// ---- mbarriers --------------------------------------------------------------------------------
inline MBar& mbar(Block& b, uint32_t addr, const char* what, Loc loc) {
  auto it = b.mbars.find(addr);
  if (it == b.mbars.end()) {
    smem_at(b, addr, 8, what, loc);
    fail("mbarrier", fmt("%s on the mbarrier at shared byte %u, which was never initialised "
                         "(mbarrier.init)", what, addr - SMEM_BASE), loc);
  }
  return it->second;
}

inline void mbar_complete_if(MBar& m) {
  if (m.pending == 0 && m.tx == 0) { ++m.phase; m.pending = m.expected; }
}

inline void mbar_init(uint32_t addr, uint32_t count, Loc loc) {
  Block& b = blk();
  if (addr % 8 != 0) fail("mbarrier", fmt("mbarrier at shared byte %u is not 8-byte aligned",
                                          addr - SMEM_BASE), loc);
  smem_at(b, addr, 8, "mbarrier.init", loc);
  if (count == 0 || count > (1u << 20) - 1) {
    fail("mbarrier", fmt("mbarrier.init with arrival count %u (must be 1..2^20-1)", count), loc);
  }
  MBar m;
  m.expected = m.pending = count;
  m.init = loc;
  b.mbars[addr] = m;
  const uint32_t off = addr - SMEM_BASE;
  for (int i = 0; i < 8; ++i) b.init[off + i] = 1;
}

inline void mbar_arrive(Block& b, uint32_t addr, uint32_t count, Loc loc) {
  MBar& m = mbar(b, addr, "mbarrier.arrive", loc);
  if (count > m.pending) {
    fail("mbarrier", fmt("%u arrival(s) on the mbarrier at shared byte %u, whose current phase "
                         "expects only %u more (initialised with %u at %s)", count,
                         addr - SMEM_BASE, m.pending, m.expected, where(m.init).c_str()), loc);
  }
  m.pending -= count;
  mbar_complete_if(m);
}

inline void mbar_expect_tx(Block& b, uint32_t addr, uint32_t bytes, Loc loc) {
  MBar& m = mbar(b, addr, "mbarrier.expect_tx", loc);
  m.tx += bytes;
}

inline void mbar_complete_tx(Block& b, uint32_t addr, uint32_t bytes, Loc loc) {
  MBar& m = mbar(b, addr, "complete_tx", loc);
  m.tx -= bytes;
  mbar_complete_if(m);
}

inline void mbar_wait(uint32_t addr, uint32_t parity, Loc loc) {
  Block& b = blk();
  MBar& m = mbar(b, addr, "mbarrier.try_wait.parity", loc);
  MBar* p = &m;
  const uint32_t want = parity & 1u;
  preempt(loc);
  block_until([p, want] { return (p->phase & 1u) != want; },
              [p, addr, want] {
                return fmt("mbarrier at shared byte %u to complete its phase of parity %u "
                           "(phase %llu: %u arrival(s) and %lld transaction byte(s) pending)",
                           addr - SMEM_BASE, want, static_cast<unsigned long long>(p->phase),
                           p->pending, static_cast<long long>(p->tx));
              }, loc);
}

}  // namespace cake_emu

#define __syncthreads() ::cake_emu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ::cake_emu::syncwarp(__FILE__, __LINE__)
#define __trap() ::cake_emu::fail("trap", "the kernel executed __trap()", {__FILE__, __LINE__})

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, CAKE_LOC) {
  if (mask != 0xffffffffu) {
    ::cake_emu::fail("collective", "emulated shuffles take the full warp mask",
                     ::cake_emu::at({CAKE_LOC_ARGS}));
  }
  return ::cake_emu::shfl_xor(v, lane_mask, ::cake_emu::at({CAKE_LOC_ARGS}));
}
