# SYNTAX TEST "source.cake" "the Python layer: comments, strings, numbers, keywords, decorators"
"""Module docstring: kernels are read, never executed."""
# <--- string.quoted.triple.cake punctuation.definition.string.begin.cake
#  ^^^^^^ string.quoted.triple.cake

BM, BN, BK, STAGES = 128, 256, 64, 4  # tile sizes
#                    ^^^ constant.numeric.integer.cake
#                                     ^ comment.line.number-sign.cake punctuation.definition.comment.cake
#                                       ^^^^^^^^^^ comment.line.number-sign.cake
SCALE = 0.125
#       ^^^^^ constant.numeric.float.cake
MASK = 0xFF
#      ^^^^ constant.numeric.hex.cake
EPS = 1e-6
#     ^^^^ constant.numeric.float.cake

@kernel(arch="sm_90a", grid=(1,), warps=4)
# <- meta.decorator.cake punctuation.definition.decorator.cake
#^^^^^^ meta.decorator.cake entity.name.function.decorator.cake
#            ^ string.quoted.double.cake punctuation.definition.string.begin.cake
#             ^^^^^^ string.quoted.double.cake
#                                  ^^^^^ - keyword.operator
def tiny(x: Tensor[f32, (M,)]) -> None:
# <--- storage.type.function.cake
#   ^^^^ entity.name.function.cake
#           ^^^^^^ support.class.tensor.cake
#                              ^^ punctuation.separator.annotation.result.cake
#                                 ^^^^ constant.language.cake
    for k in range(4):
#   ^^^ keyword.control.flow.cake
#         ^^ keyword.operator.logical.cake
#            ^^^^^ support.function.builtin.cake
        if k == 0 and not done:
#       ^^ keyword.control.flow.cake
#            ^^ keyword.operator.comparison.cake
#                 ^^^ keyword.operator.logical.cake
#                     ^^^ keyword.operator.logical.cake
            pass
#           ^^^^ keyword.control.flow.cake
    name = 'it\'s'
#          ^ string.quoted.single.cake punctuation.definition.string.begin.cake
#             ^^ string.quoted.single.cake constant.character.escape.cake
#                ^ string.quoted.single.cake punctuation.definition.string.end.cake
