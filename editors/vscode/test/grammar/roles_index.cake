# SYNTAX TEST "source.cake" "roles and index spaces"
ab = pipeline(stages=4, producer="load", consumer="mma")
#                       ^^^^^^^^ variable.parameter.function-call.cake
#                                 ^^^^ string.quoted.role.cake entity.name.tag.role.cake
#                                                  ^^^ string.quoted.role.cake entity.name.tag.role.cake
with role("load", warps=range(0, 4), regs=40):
#    ^^^^ support.function.role.cake
#         ^ string.quoted.role.cake punctuation.definition.string.begin.cake
#          ^^^^ string.quoted.role.cake entity.name.tag.role.cake
#              ^ string.quoted.role.cake punctuation.definition.string.end.cake
    t = A.tile((BM, BK), (block.x, k))
#                         ^^^^^ variable.language.index-space.cake
#                              ^ punctuation.accessor.cake
#                               ^ variable.language.index-space.member.cake
    u = (block.y, block.z, cluster.rank)
#        ^^^^^ variable.language.index-space.cake
#              ^ variable.language.index-space.member.cake
#                          ^^^^^^^ variable.language.index-space.cake
#                                  ^^^^ variable.language.index-space.member.cake
    if warp.id == 0 and lane.id < 4 and warpgroup.rank == 1:
#      ^^^^ variable.language.index-space.cake
#           ^^ variable.language.index-space.member.cake
#                       ^^^^ variable.language.index-space.cake
#                                       ^^^^^^^^^ variable.language.index-space.cake
#                                                 ^^^^ variable.language.index-space.member.cake
        w = thread.id
#           ^^^^^^ variable.language.index-space.cake
#                  ^^ variable.language.index-space.member.cake
    n = self.block
#            ^^^^^ - variable.language.index-space.cake
