// The CPU runtime's layout functions in plain types, for tests/emulate/layouts_cute.cpp.
// The runtime (cake_emulate.h) and CuTe cannot share a translation unit: both define the
// CUDA vector, half and tensor-map types, the runtime its own emulated ones.  So
// layouts_cake.cpp wraps the runtime's functions behind this header and the CuTe side
// compares them with CuTe's layouts; the two link into one program.
#pragma once

#include <cstdint>

namespace cake_probe {

struct Coord { int row, col; };
struct Slot { int lane, reg, half; };
struct Desc { uint32_t start, lbo, sbo; int span; };

// async.h
uint32_t swizzle(uint32_t addr, int span);
// encode_tiled on a 2-D (box0 x box1) tensor of the box's size, `dtype` and `swizzle` given as
// the driver API's enum values; nullptr or encode_tiled's message.
const char* encode_2d(int dtype, int swizzle, uint32_t box0, uint32_t box1, int* elem_bytes,
                      int* span);
// The shared-window address box_smem gives box element `lin` of that map loaded at `dst`.
uint32_t box_smem(int dtype, int swizzle, uint32_t box0, uint32_t box1, uint32_t dst,
                  uint32_t lin);

// The lowering's prelude (cake_core/lower/prelude/wgmma.py) and tensor_core.h
uint64_t lowering_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint32_t mode);
Desc decode(uint64_t desc);
uint32_t operand_addr(uint64_t desc, int row, int kbyte);
Coord wgmma_acc(int thread, int reg);
Slot mma_a(int row, int k);
Slot mma_b(int k, int n);
Coord mma_c(int lane, int reg);
Coord ldmatrix(int lane, int half, bool trans);

}  // namespace cake_probe
