// Shared and global memory as the emulated threads see them.  A block's dynamic shared
// memory is a host allocation whose shared-window address starts at SMEM_BASE (1024-aligned,
// as the swizzles require).  Accesses through the runtime's helpers are bounds-checked and
// shadowed: which bytes were ever written (reads of never-written bytes are findings) and
// which were written through the generic proxy since the writer's last
// `fence.proxy.async` (an async-proxy read of such bytes - TMA store, wgmma - is a finding).
#pragma once

namespace cake_emu {

inline uint32_t smem_addr(const void* p) {
  Block& b = blk();
  const auto* c = static_cast<const unsigned char*>(p);
  return SMEM_BASE + static_cast<uint32_t>(c - b.smem);
}

inline bool in_smem(const void* p) {
  // A pointer into a registered tensor is global memory, however close the host heap put it
  // to the block's shared memory: a 1-D global tile is read through the generic helpers.
  const auto lo = reinterpret_cast<uintptr_t>(p);
  for (const Buffer& g : g_buffers) {
    if (lo >= g.lo && lo < g.hi) return false;
  }
  Block& b = blk();
  const auto* c = static_cast<const unsigned char*>(p);
  return c >= b.smem - (1u << 20) && c < b.smem + b.smem_bytes + (1u << 20);
}

// The host bytes of [addr, addr + n) in `b`'s shared memory, or a finding.
inline unsigned char* smem_at(Block& b, uint32_t addr, uint32_t n, const char* what, Loc loc) {
  if (addr < SMEM_BASE || addr - SMEM_BASE + uint64_t(n) > b.smem_bytes) {
    fail("smem_bounds", fmt("%s: shared-memory bytes [%u, %u) lie outside the block's %u B of "
                            "dynamic shared memory", what, addr - SMEM_BASE,
                            addr - SMEM_BASE + n, b.smem_bytes), loc);
  }
  return b.smem + (addr - SMEM_BASE);
}

// Reads: never-written bytes are a finding (they would hold whatever the previous block left).
inline void check_init(Block& b, uint32_t addr, uint32_t n, const char* what, Loc loc) {
  const uint32_t off = addr - SMEM_BASE;
  for (uint32_t i = 0; i < n; ++i) {
    if (!b.init[off + i]) {
      fail("uninitialized_read", fmt("%s reads shared-memory byte %u, which nothing wrote "
                                     "before", what, off + i), loc);
    }
  }
}

// An async-proxy read (TMA store source, wgmma operand) of bytes a thread wrote through the
// generic proxy without a later fence.proxy.async.
inline void check_fenced(Block& b, uint32_t addr, uint32_t n, const char* what, Loc loc) {
  const uint32_t off = addr - SMEM_BASE;
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t w = b.dirty_by[off + i];
    if (w != 0) {
      fail("proxy_fence", fmt("%s reads shared-memory byte %u that thread %d wrote with a "
                              "generic store and did not order with fence.proxy.async "
                              "(cake_fence_proxy_async) before the asynchronous read", what,
                              off + i, w - 1), loc);
    }
  }
}

inline void mark_async_write(Block& b, uint32_t addr, uint32_t n) {
  const uint32_t off = addr - SMEM_BASE;
  for (uint32_t i = 0; i < n; ++i) { b.init[off + i] = 1; b.dirty_by[off + i] = 0; }
}

inline void mark_generic_write(Block& b, uint32_t addr, uint32_t n) {
  const uint32_t off = addr - SMEM_BASE;
  Thread& t = cur();
  for (uint32_t i = 0; i < n; ++i) { b.init[off + i] = 1; b.dirty_by[off + i] = t.tid + 1; }
  if (!t.dirty.empty() && t.dirty.back().second == off) t.dirty.back().second = off + n;
  else t.dirty.emplace_back(off, off + n);
  if (t.dirty.size() > 4096) {  // keep the list short: merge everything into one range
    uint32_t lo = UINT32_MAX, hi = 0;
    for (auto& r : t.dirty) { lo = std::min(lo, r.first); hi = std::max(hi, r.second); }
    t.dirty.assign(1, {lo, hi});
  }
}

inline void proxy_fence() {
  Thread& t = cur();
  Block& b = blk();
  for (auto& r : t.dirty) {
    for (uint32_t i = r.first; i < r.second && i < b.smem_bytes; ++i) {
      if (b.dirty_by[i] == t.tid + 1) b.dirty_by[i] = 0;
    }
  }
  t.dirty.clear();
}

// Generic accesses through a pointer: checked when it points into (or just around) the
// block's shared memory.
inline void generic_smem_write(const void* p, uint32_t n, Loc loc) {
  if (!in_smem(p)) return;
  Block& b = blk();
  const uint32_t a = smem_addr(p);
  smem_at(b, a, n, "a store", loc);
  mark_generic_write(b, a, n);
}

inline void generic_smem_read(const void* p, uint32_t n, Loc loc) {
  if (!in_smem(p)) return;
  Block& b = blk();
  const uint32_t a = smem_addr(p);
  smem_at(b, a, n, "a load", loc);
  check_init(b, a, n, "a load", loc);
}

// Global memory: the buffers the caller registered.
inline void check_global(const void* p, uint64_t n, const char* what, Loc loc) {
  if (g_buffers.empty()) return;
  const auto lo = reinterpret_cast<uintptr_t>(p);
  for (const Buffer& b : g_buffers) {
    if (lo >= b.lo && lo + n <= b.hi) return;
  }
  fail("global_bounds", fmt("%s touches global bytes [%#lx, %#lx), outside every tensor "
                            "passed to the kernel", what, static_cast<unsigned long>(lo),
                            static_cast<unsigned long>(lo + n)), loc);
}

}  // namespace cake_emu
