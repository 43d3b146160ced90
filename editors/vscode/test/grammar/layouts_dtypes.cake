# SYNTAX TEST "source.cake" "layouts, fragment layouts and dtypes"
sa = smem(bf16, (4, 128, 64), layout=swizzle(128))
#         ^^^^ support.type.dtype.cake
#                                    ^^^^^^^ support.function.layout.cake
sp = smem(f16, (64, 72), layout=padded(row_major, 8))
#         ^^^ support.type.dtype.cake
#                               ^^^^^^ support.function.layout.cake
#                                      ^^^^^^^^^ support.constant.layout.smem.cake
st = smem(f32, (64, 64), layout=col_major)
#                               ^^^^^^^^^ support.constant.layout.smem.cake
acc = fragment(f32, (128, 256), layout=wgmma_acc)
#                                      ^^^^^^^^^ support.constant.layout.fragment.cake
a = fragment(bf16, (16, 16), layout=mma_a)
#                                   ^^^^^ support.constant.layout.fragment.cake
r = fragment(i32, (128,), layout=rows)
#            ^^^ support.type.dtype.cake
#                                ^^^^ support.constant.layout.fragment.cake
q = cast(x, e4m3)
#           ^^^^ support.type.dtype.cake
w = cast(x, e5m2)
#           ^^^^ support.type.dtype.cake
m = fragment(bool, (8,))
#            ^^^^ support.type.dtype.cake
u = fragment(u32, (8,))
#            ^^^ support.type.dtype.cake
v = fragment(i8, (8,), fill=inf)
#            ^^ support.type.dtype.cake
#                           ^^^ constant.language.cake
x.f32 = 1
# ^^^ - support.type.dtype.cake
f32x = 2
# <---- - support.type.dtype.cake
