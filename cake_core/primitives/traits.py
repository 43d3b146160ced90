"""Traits: the properties of a primitive that analyses ask about instead of its name.

An analysis that needs to know "is this op a tensor-core MMA?" or "does it allocate
shared memory?" asks `Trait.MMA in op.prim.traits`, so a plugin primitive with the same
property is handled the same way as a built-in, and a new primitive states what it is
in its own declaration instead of in every analysis that special-cases it.

What an op does to memory and barriers is not a trait: that is its `EffectSpec`
(reads, writes, async group, arrivals, waits, fences).
"""

from __future__ import annotations

from enum import Enum


class Trait(Enum):
    """A property an analysis may dispatch on; the value is how docs name it."""

    THREAD_LOCAL = "thread-local"
    """Touches nothing another thread can see (registers, views, allocations): the
    simulator does not switch processes after it."""

    ALLOCATES_SMEM = "allocates shared memory"
    """`smem(...)`: its result is a shared-memory buffer placed by the smem plan."""

    ALLOCATES_BARRIER = "allocates an mbarrier"
    """`mbarrier(...)`: its result is a raw barrier (placed in smem, initialised once)."""

    ALLOCATES_FRAGMENT = "allocates a register fragment"
    """`fragment(...)`: its result is a register tile with a fixed layout."""

    DECLARES_PIPELINE = "declares a pipeline"
    """`pipeline(...)`: its result owns a ring of full/empty barriers."""

    SMEM_VIEW = "views shared memory"
    """A view of a buffer (`sa[s]`, `sa.tile(...)`): no data moves."""

    GLOBAL_TILE = "names a global tile"
    """A tile of a global tensor (`A.tile(...)`): an address computation, no data moves."""

    MMA = "tensor-core MMA"
    """Reads `a` and `b` as MMA operands and accumulates into `acc`."""

    ELEMENTWISE = "elementwise"
    """Register math applied element by element (result layout = operand layout)."""

    ROW_REDUCTION = "row reduction"
    """Reduces each row of a 2-D fragment (a warp collective: lanes of a row shuffle)."""

    SINGLE_THREAD = "issued by one thread"
    """Issued by a single elected thread of its role in the lowering (TMA, pipeline
    producer steps, barrier arrivals), so a role made only of such ops can run on one
    thread."""

    GLOBAL_STORE = "stores to global memory"
    """Writes a global tensor (the lowering guards it against the tensor's bounds)."""

    BLOCK_BARRIER = "block barrier"
    """`syncthreads()`: every thread of the block meets here."""

    CLUSTER_BARRIER = "cluster barrier"
    """`cluster_sync()`: every thread of every block of the cluster meets here (it is a
    block barrier as well)."""

    BARRIER_INIT_FENCE = "fences barrier initialisation"
    """Makes the mbarrier initialisations visible to the async proxy and the cluster."""

    TMA_COPY = "TMA copy"
    """Copies a box between a global tile (its `global_tile` parameter) and shared memory
    through a TMA descriptor: the box and the tensor's strides must be encodable."""

    WARPGROUP_MMA = "warpgroup MMA"
    """An MMA issued by whole warpgroups (4 aligned warps), each owning a 64-row slab of
    `acc`, reading shared-memory operands through descriptors that transpose only
    16-bit elements (other dtypes must be K-major)."""

    REGISTER_ALIAS = "aliases its operand's registers"
    """Its result is a view of registers of its operand `x` (a column slice of a wgmma
    fragment): no data moves, so whatever reads the result reads `x`'s registers, and
    re-binding `x` while an asynchronous read of the result is in flight is a hazard."""

    REGISTER_STAGING = "stages operands in registers"
    """Its result fragment holds operands on their way from memory to compute (ldmatrix,
    load): the register estimate counts these per live copy, not as temporaries."""

    WARP_COLLECTIVE = "warp collective"
    """Every lane of each warp that runs it must run it together (shuffles, ldmatrix,
    mma.sync): under a condition that differs between the lanes of a warp it is undefined
    (CK314)."""

    WARPGROUP_COLLECTIVE = "warpgroup collective"
    """Every thread of each warpgroup that runs it must run it together (wgmma and its
    waits, `.sync.aligned` over 128 threads): under a condition that differs between the
    warps of a warpgroup it is undefined (CK314).  Implies nothing about `WARP_COLLECTIVE`;
    a warpgroup collective is checked against lane-varying conditions as well."""

    REGISTER_MATH = "register math"
    """Computes on registers only (no memory, no synchronisation): a statement made of
    such ops can move to whichever role holds its operands."""

