// The CAKE side of test_layouts_independent.py: the CPU runtime's layout functions, the very
// ones the emulation runs, behind layouts_probe.h.  Built with -DCAKE_EMULATE and the
// runtime's include folder; `lowering_wgmma.h` is the lowering's wgmma prelude text, which
// the test writes next to the build.
#include "cake_emulate.h"
#include "lowering_wgmma.h"
#include "layouts_probe.h"

namespace cake_probe {

namespace {
const cake_emu::Loc HERE{"layouts_cake.cpp", 0};
alignas(64) unsigned char g_tensor[256 * 256];  // the global tensor a probe map describes

const char* encode(CUtensorMap* map, int dtype, int swizzle, uint32_t box0, uint32_t box1) {
  const uint64_t dims[2] = {box0, box1};
  const auto dt = static_cast<CUtensorMapDataType>(dtype);
  const uint64_t strides[1] = {box0 * static_cast<uint64_t>(cake_emu::tmap_elem_bytes(dt))};
  const uint32_t box[2] = {box0, box1};
  return cake_emu::encode_tiled(map, dt, 2, g_tensor, dims, strides, box,
                                static_cast<CUtensorMapSwizzle>(swizzle));
}
}  // namespace

uint32_t swizzle(uint32_t addr, int span) { return cake_emu::swizzle_addr(addr, span); }

const char* encode_2d(int dtype, int swizzle, uint32_t box0, uint32_t box1, int* elem_bytes,
                      int* span) {
  CUtensorMap map;
  const char* err = encode(&map, dtype, swizzle, box0, box1);
  *elem_bytes = map.elem_bytes;
  *span = map.swizzle_span;
  return err;
}

uint32_t box_smem(int dtype, int swizzle, uint32_t box0, uint32_t box1, uint32_t dst,
                  uint32_t lin) {
  CUtensorMap map;
  encode(&map, dtype, swizzle, box0, box1);
  return cake_emu::box_smem(map, dst, lin);
}

uint64_t lowering_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint32_t mode) {
  return cake_wgmma_desc(addr, lbo, sbo, mode);
}

Desc decode(uint64_t desc) {
  const cake_emu::Desc d = cake_emu::decode_desc(desc, HERE);
  return {d.start, d.lbo, d.sbo, d.span};
}

uint32_t operand_addr(uint64_t desc, int row, int kbyte) {
  return cake_emu::operand_addr(cake_emu::decode_desc(desc, HERE), row, kbyte);
}

Coord wgmma_acc(int thread, int reg) {
  const cake_emu::Coord c = cake_emu::wgmma_acc_coord(thread, reg);
  return {c.row, c.col};
}

Slot mma_a(int row, int k) {
  const cake_emu::FragSlot s = cake_emu::mma_a_slot(row, k);
  return {s.lane, s.reg, s.half};
}

Slot mma_b(int k, int n) {
  const cake_emu::FragSlot s = cake_emu::mma_b_slot(k, n);
  return {s.lane, s.reg, s.half};
}

Coord mma_c(int lane, int reg) {
  const cake_emu::Coord c = cake_emu::mma_c_coord(lane, reg);
  return {c.row, c.col};
}

Coord ldmatrix(int lane, int half, bool trans) {
  const cake_emu::Coord c = cake_emu::ldmatrix_coord(lane, half, trans);
  return {c.row, c.col};
}

}  // namespace cake_probe
