"""The typed IR: types, symbolic index expressions, values, ops and kernels.

Plain data the elaboration (`cake_core.elab`) builds and every analysis reads.
"""
