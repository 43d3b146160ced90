"""cake-kmeans: the online-argmin epilogue primitive and the tactic that introduces it.

`argmin_update(best_v, best_i, dist, offset)` folds one chunk of distances into a running
per-row (value, index) pair; `fuse-online-argmin` rewrites the built-in four-statement
form of that update (as in examples/kmeans_assign_sm90.cake) into the one call.
"""

from cake_core.plugins import Plugin
from cake_kmeans.fuse import FUSE_ONLINE_ARGMIN
from cake_kmeans.primitive import ARGMIN_UPDATE, PLUGIN_NAME

plugin = Plugin(
    name=PLUGIN_NAME,
    version="0.1.0",
    primitives=(ARGMIN_UPDATE,),
    tactics=(FUSE_ONLINE_ARGMIN,),
    description="Online argmin epilogue (argmin_update) and the fuse-online-argmin tactic",
)

__all__ = ["ARGMIN_UPDATE", "FUSE_ONLINE_ARGMIN", "plugin"]
