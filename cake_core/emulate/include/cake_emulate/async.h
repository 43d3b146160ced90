// Asynchronous copies: cp.async (PTX ISA 9.7.9.21) with per-thread commit groups, the
// tensor map of cuTensorMapEncodeTiled (its validation rules included), and TMA tensor
// loads and stores (PTX ISA 9.7.9.25) with the hardware swizzle and out-of-bounds rules.
// Each copy is an AsyncOp the scheduler completes at a time of its choosing; a wait that
// needs a copy completes it then ("as late as allowed").
#pragma once

namespace cake_emu {

// Swizzle<B, 4, 3> on a shared-window address: 16-byte chunk bits [4, 4+B) XOR row bits
// [7, 7+B), B = log2(span / 16) (the TMA and wgmma swizzle modes; PTX ISA 9.7.15.5.1).
inline uint32_t swizzle_addr(uint32_t addr, int span) {
  switch (span) {
    case 128: return addr ^ (((addr >> 7) & 7u) << 4);
    case 64: return addr ^ (((addr >> 7) & 3u) << 4);
    case 32: return addr ^ (((addr >> 7) & 1u) << 4);
    default: return addr;
  }
}

// ---- cp.async -------------------------------------------------------------------------------
inline void cp_async(uint32_t dst, const void* src, uint32_t cp_bytes, uint32_t src_bytes,
                     Loc loc) {
  Block& b = blk();
  if (dst % cp_bytes != 0) fail("smem_bounds", fmt("cp.async destination %u is not %u-byte "
                                                   "aligned", dst - SMEM_BASE, cp_bytes), loc);
  smem_at(b, dst, cp_bytes, "cp.async", loc);
  if (src_bytes > cp_bytes) fail("fault", fmt("cp.async src-size %u exceeds %u", src_bytes,
                                              cp_bytes), loc);
  if (src_bytes) check_global(src, src_bytes, "cp.async", loc);
  unsigned char data[16] = {};
  Block* bp = &b;
  const size_t id = add_async([bp, dst, src, cp_bytes, src_bytes, loc] {
    unsigned char* d = smem_at(*bp, dst, cp_bytes, "cp.async", loc);
    std::memset(d, 0, cp_bytes);
    if (src_bytes) std::memcpy(d, src, src_bytes);
    mark_async_write(*bp, dst, cp_bytes);
  }, "cp.async", loc);
  (void)data;
  cur().cp_open.push_back(id);
}

inline void cp_async_commit() {
  Thread& t = cur();
  t.cp_groups.push_back(std::move(t.cp_open));
  t.cp_open.clear();
}

// cp.async.wait_group N: all but the newest N committed groups are complete (empty groups
// count as groups; uncommitted copies are not waited for).
inline void cp_async_wait(int n, Loc loc) {
  Thread& t = cur();
  preempt(loc);
  while (static_cast<int>(t.cp_groups.size()) > n) {
    for (size_t id : t.cp_groups.front()) complete(id);
    t.cp_groups.erase(t.cp_groups.begin());
  }
}

// ---- tensor maps ----------------------------------------------------------------------------
inline constexpr uint32_t TMAP_MAGIC = 0xCA4E7A9Bu;

inline int tmap_elem_bytes(CUtensorMapDataType t) {
  switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: return 4;
    default: return 8;
  }
}

// The checks cuTensorMapEncodeTiled makes (CUDA driver API reference): rank 1..5, a 16-byte
// aligned base, dims in [1, 2^32], strides multiples of 16 below 2^40, box dims in [1, 256],
// the inner box a multiple of 16 bytes, and at most the swizzle span when swizzled.  One
// more the driver cannot make: the mapped extent must lie inside a buffer the caller
// registered (a reason starting with '@' is that check, not the driver's).
inline const char* encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype, uint32_t rank,
                                const void* base, const uint64_t* dims, const uint64_t* strides,
                                const uint32_t* box, CUtensorMapSwizzle swizzle) {
  if (rank < 1 || rank > 5) return "tensor rank must be 1..5";
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return "global address not 16-byte aligned";
  const int eb = tmap_elem_bytes(dtype);
  std::memset(map, 0, sizeof *map);
  map->magic = TMAP_MAGIC;
  map->rank = static_cast<int32_t>(rank);
  map->elem_bytes = eb;
  map->swizzle_span = swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                      : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                      : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : 0;
  map->base = base;
  for (uint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return "a global dimension is 0 or above 2^32";
    if (box[i] == 0 || box[i] > 256) return "a box dimension is outside 1..256";
    map->dims[i] = dims[i];
    map->box[i] = box[i];
  }
  map->strides[0] = static_cast<uint64_t>(eb);
  for (uint32_t i = 1; i < rank; ++i) {
    const uint64_t s = strides[i - 1];
    if (s % 16 != 0 || s >= (1ull << 40)) return "a global stride is not a multiple of 16 below 2^40";
    map->strides[i] = s;
  }
  if ((box[0] * eb) % 16 != 0) return "the inner box dimension is not a multiple of 16 bytes";
  if (map->swizzle_span && box[0] * static_cast<uint32_t>(eb) > static_cast<uint32_t>(map->swizzle_span)) {
    return "the inner box dimension exceeds the swizzle span";
  }
  // the whole tensor must lie in memory the caller passed
  uint64_t last = 0;
  for (uint32_t i = 0; i < rank; ++i) last += (dims[i] - 1) * map->strides[i];
  if (!g_buffers.empty()) {
    const auto lo = reinterpret_cast<uintptr_t>(base);
    bool inside = false;
    for (const Buffer& b : g_buffers) inside |= lo >= b.lo && lo + last + eb <= b.hi;
    if (!inside) return "@the tensor map's extent (dims x strides) reaches past every tensor passed "
                        "to the kernel: its TMA copies would touch memory the kernel does not own";
  }
  return nullptr;
}

inline const CUtensorMap& check_map(const CUtensorMap* map, Loc loc) {
  if (map == nullptr || map->magic != TMAP_MAGIC) {
    fail("fault", "a TMA operation names something that is not an encoded tensor map", loc);
  }
  return *map;
}

// Visit every element of the box at `coords`: f(box_linear_index, global_pointer_or_null).
template <class F>
inline void for_box(const CUtensorMap& m, const int* coords, F f) {
  uint32_t n = 1;
  for (int i = 0; i < m.rank; ++i) n *= m.box[i];
  for (uint32_t lin = 0; lin < n; ++lin) {
    uint32_t rest = lin;
    bool inside = true;
    uint64_t off = 0;
    for (int i = 0; i < m.rank; ++i) {
      const uint32_t e = rest % m.box[i];
      rest /= m.box[i];
      const int64_t g = static_cast<int64_t>(coords[i]) + e;
      if (g < 0 || g >= static_cast<int64_t>(m.dims[i])) inside = false;
      else off += static_cast<uint64_t>(g) * m.strides[i];
    }
    f(lin, inside ? static_cast<const unsigned char*>(m.base) + off : nullptr);
  }
}

inline uint32_t box_bytes(const CUtensorMap& m) {
  uint32_t n = static_cast<uint32_t>(m.elem_bytes);
  for (int i = 0; i < m.rank; ++i) n *= m.box[i];
  return n;
}

// The smem address of box element `lin`: the box is stored densely, innermost dimension
// contiguous, then swizzled by address bits.
inline uint32_t box_smem(const CUtensorMap& m, uint32_t dst, uint32_t lin) {
  return swizzle_addr(dst + lin * static_cast<uint32_t>(m.elem_bytes), m.swizzle_span);
}

// `mask` != 0: a multicast to the blocks of the running cluster whose rank is set in it
// (same smem offset, each completing on its own barrier at `bar`'s offset).
inline void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, const int* c, int rank,
                     Loc loc, uint16_t mask = 0) {
  const CUtensorMap m = check_map(map, loc);
  if (m.rank != rank) fail("fault", fmt("a %dD TMA load on a %dD tensor map", rank, m.rank), loc);
  const uint32_t align = m.swizzle_span ? 128u * (m.swizzle_span / 16u) : 128u;
  if ((dst - SMEM_BASE) % (m.swizzle_span ? align : 128u) != 0) {
    fail("smem_bounds", fmt("TMA load destination %u is not %u-byte aligned", dst - SMEM_BASE,
                            m.swizzle_span ? align : 128u), loc);
  }
  std::vector<Block*> targets;
  if (mask == 0) {
    targets.push_back(&blk());
  } else {
    for (const auto& b : g_launch->blocks)
      if (b->cluster_rank < 16 && (mask >> b->cluster_rank) & 1u) targets.push_back(b.get());
    if (targets.size() != static_cast<size_t>(__builtin_popcount(mask))) {
      fail("fault", fmt("TMA multicast mask 0x%x names ranks outside the cluster of %zu blocks",
                        mask, g_launch->blocks.size()), loc);
    }
  }
  const uint32_t bytes = box_bytes(m);
  for (Block* bp : targets) {
    smem_at(*bp, dst, bytes, "TMA load", loc);
    mbar(*bp, bar, "TMA load (complete_tx)", loc);
  }
  int coords[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < rank; ++i) coords[i] = c[i];
  for (Block* bp : targets) {
    add_async([bp, m, dst, bar, coords, bytes, loc] {
      for_box(m, coords, [&](uint32_t lin, const unsigned char* g) {
        unsigned char* d = smem_at(*bp, box_smem(m, dst, lin), m.elem_bytes, "TMA load", loc);
        if (g) std::memcpy(d, g, m.elem_bytes);
        else std::memset(d, 0, m.elem_bytes);
      });
      for (uint32_t i = 0; i < bytes; i += 16) mark_async_write(*bp, swizzle_addr(dst + i, m.swizzle_span), 16);
      mbar_complete_tx(*bp, bar, bytes, loc);
    }, "TMA load", loc);
  }
}

inline void tma_store(const CUtensorMap* map, uint32_t src, const int* c, int rank, Loc loc) {
  const CUtensorMap m = check_map(map, loc);
  if (m.rank != rank) fail("fault", fmt("a %dD TMA store on a %dD tensor map", rank, m.rank), loc);
  Block& b = blk();
  const uint32_t bytes = box_bytes(m);
  smem_at(b, src, bytes, "TMA store", loc);
  int coords[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < rank; ++i) coords[i] = c[i];
  // the async proxy reads the source: generic writes must be fenced by now
  for (uint32_t i = 0; i < bytes; i += 16) check_fenced(b, swizzle_addr(src + i, m.swizzle_span), 16, "TMA store", loc);
  Block* bp = &b;
  const size_t id = add_async([bp, m, src, coords, loc] {
    for_box(m, coords, [&](uint32_t lin, const unsigned char* g) {
      const uint32_t a = box_smem(m, src, lin);
      unsigned char* s = smem_at(*bp, a, m.elem_bytes, "TMA store", loc);
      check_init(*bp, a, m.elem_bytes, "TMA store", loc);
      if (g) std::memcpy(const_cast<unsigned char*>(g), s, m.elem_bytes);
    });
  }, "TMA store", loc);
  cur().bulk_open.push_back(id);
}

inline void bulk_commit() {
  Thread& t = cur();
  t.bulk_groups.push_back(std::move(t.bulk_open));
  t.bulk_open.clear();
}

// cp.async.bulk.wait_group.read N: the sources of all but the newest N groups were read.
inline void bulk_wait_read(int n, Loc loc) {
  Thread& t = cur();
  preempt(loc);
  while (static_cast<int>(t.bulk_groups.size()) > n) {
    for (size_t id : t.bulk_groups.front()) complete(id);
    t.bulk_groups.erase(t.bulk_groups.begin());
  }
}

}  // namespace cake_emu
