"""cake-tactics: CAKE's first-party rewrites, shipped as a plugin like any third party's."""

from cake_core.plugins import Plugin
from cake_tactics.tactics import TACTICS

plugin = Plugin(
    name="cake-tactics",
    version="0.1.0",
    tactics=TACTICS,
    description="Tile sizes, stage counts, swizzles, register splits; warp specialisation, "
                "cp.async <-> TMA, persistent tiles, double-buffered accumulators",
)
