"""Tactics that restructure a kernel: who copies, how, and which tiles a block computes.

Unlike the retuning tactics (`tactics.py`), these move statements between roles and
loops, or (`double_buffer.py`) peel and unroll a loop to alternate two accumulators, or
(`tma_epilogue.py`) stage an accumulator's store in shared memory for TMA, or
(`pingpong.py`) split a consumer role into two that take turns, or (`fma_fusion.py`) fuse
a multiply and an add by a power of two into one `fma`, or (`causal_skip.py`) stop a
causal kernel's key loops at the block's diagonal.
Each recognises a precise form on the typed IR, rebuilds the affected statements from
their own source lines, and is offered only when the result verifies.
"""

from __future__ import annotations

from cake_tactics.async_copy import ASYNC_COPY
from cake_tactics.causal_skip import CAUSAL_TILE_SKIP
from cake_tactics.double_buffer import ACC_DOUBLE_BUFFER
from cake_tactics.fma_fusion import FMA_FUSION
from cake_tactics.persistent import PERSISTENT_TILES
from cake_tactics.pingpong import CONSUMER_PINGPONG
from cake_tactics.tma_epilogue import TMA_EPILOGUE
from cake_tactics.warp_specialize import WARP_SPECIALIZE

STRUCTURAL = (WARP_SPECIALIZE, ASYNC_COPY, PERSISTENT_TILES, ACC_DOUBLE_BUFFER,
              CONSUMER_PINGPONG, TMA_EPILOGUE, FMA_FUSION, CAUSAL_TILE_SKIP)

__all__ = ["ACC_DOUBLE_BUFFER", "ASYNC_COPY", "CAUSAL_TILE_SKIP", "CONSUMER_PINGPONG",
           "FMA_FUSION",
           "PERSISTENT_TILES",
           "STRUCTURAL", "TMA_EPILOGUE",
           "WARP_SPECIALIZE"]
