"""The primitive registry: every op of CAKE IR with all its facets in one place.

A primitive declares its signature, the arch features it needs (and what to use
without them), its type rule, its effects (what it reads, writes, arrives on and waits
for), its traits, its docs, and explicit references to its cost, simulation and lowering
facets.  Built-in primitives and plugin primitives go through the same `Registry`;
registering a name twice is an error, never a silent shadow.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from cake_core.hardware import Feature
from cake_core.ir.types import Type
from cake_core.primitives.facets import Facet, FacetKind, Facets, Unsupported
from cake_core.primitives.traits import Trait

if TYPE_CHECKING:
    from cake_core.primitives.typecheck import CallContext

_REQUIRED = object()


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter: its name, the value types it accepts, and a default if optional.

    `default` is a Python value (int, float, str, None) turned into a constant Value
    when the argument is omitted; `const` demands a compile-time constant.
    """

    name: str
    kinds: tuple[type[Type], ...]
    default: object = _REQUIRED
    doc: str = ""
    const: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def param(name: str, *kinds: type[Type], default: object = _REQUIRED, doc: str = "",
          const: bool = False) -> ParamSpec:
    return ParamSpec(name, kinds, default, doc, const)


class PipeAction(Enum):
    """The step of the pipeline protocol a pipeline method performs."""

    ACQUIRE = "acquire"
    """Producer: take an empty stage (waits on its empty barrier)."""
    COMMIT = "commit"
    """Producer: publish the stage it filled (arrives on its full barrier)."""
    WAIT = "wait"
    """Consumer: take a full stage (waits on its full barrier)."""
    RELEASE = "release"
    """Consumer: hand the stage back (arrives on its empty barrier)."""

    @property
    def side(self) -> str:
        """"producer" or "consumer": the side of the pipeline that performs the step."""
        return "producer" if self in (PipeAction.ACQUIRE, PipeAction.COMMIT) else "consumer"


class SmemAccess(Enum):
    """How an op addresses a shared-memory operand: what the buffer's layout must
    serve, and which lane-address model the bank-conflict analysis follows."""

    TMA = "tma"
    """Whole boxes through a TMA descriptor (dense rows, 128-byte aligned, swizzle <= span)."""
    WGMMA = "wgmma"
    """An MMA operand read through a wgmma shared-memory descriptor."""
    LDMATRIX = "ldmatrix"
    """8x8 matrices of 16-byte rows, one row address per lane (ldmatrix, stmatrix)."""
    ROWS = "rows"
    """Vectors of a `rows` fragment, each thread moving pieces of one row."""
    CHUNKS = "chunks"
    """Row-major 16-byte chunks spread over the threads (cp.async)."""

    @property
    def banked(self) -> bool:
        """Whether the bank model follows this access's lane addresses."""
        return self in (SmemAccess.LDMATRIX, SmemAccess.ROWS, SmemAccess.CHUNKS)


@dataclass(frozen=True, slots=True)
class EffectSpec:
    """What an op does to memory and barriers, by parameter name.

    `reads`/`writes` name the arguments whose memory is accessed; `async_group` is the
    completion mechanism of an asynchronous copy ("cp_async", "tma", "bulk_store",
    "wgmma"); `arrives` names the barrier/pipeline argument the op arrives on;
    `waits` the one it waits on; `tx_bytes` says the arrival carries the bytes written.
    """

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    async_group: str | None = None
    arrives: str | None = None
    waits: str | None = None
    tx_bytes: bool = False
    fence: str | None = None  # "proxy_async", "block", "named", "mbarrier_init"
    pipe_action: PipeAction | None = None
    """The pipeline protocol step of a pipeline method (its `arrives`/`waits` is `self`)."""
    global_tile: str | None = None
    """The parameter naming the global side of a copy: its tile is the TMA box, and its
    rows decide the vector width of a plain load, store or cp.async."""
    smem_access: tuple[tuple[str, SmemAccess], ...] = ()
    """(parameter, how it is addressed) for each operand that may be shared memory; the
    layout rules and the bank-conflict analysis check these (a parameter whose argument
    is not shared memory at an op is skipped)."""
    arrive_scope: str | None = None
    """The parameter that says who makes an arrival (`ARRIVAL_SCOPES`); None: the op's
    one elected thread does, as for `expect_tx`."""
    peer: str | None = None
    """The parameter naming the cluster rank whose barrier an arrival lands on (its value
    -1, the default, is this block).  The symmetric pattern holds here too: every block
    makes the mirrored arrival, so it counts as one on this block's barrier."""
    multicast: str | None = None
    """The parameter holding a copy's constant mask of receiving cluster ranks (0 or
    absent: the issuing block only).  Every block of the mask issues its own slice to the
    same mask, so each receives `popcount(mask)` times the bytes one copy writes: the
    transaction bytes, the smem written and the L2 reads saved all follow from it."""


def multicast_fanout(op: object) -> int:
    """How many boxes of an op's shape each receiving block gets per issue (1 unless it
    multicasts); `op` is an IR `Op` (typed loosely: the IR imports this module)."""
    spec = op.prim.effects  # type: ignore[attr-defined]
    if spec.multicast is None:
        return 1
    v = op.args.get(spec.multicast)  # type: ignore[attr-defined]
    c = v.sym.const if v is not None and v.sym is not None else None
    return max(1, bin(c).count("1")) if isinstance(c, int) else 1


def peer_rank(op: object) -> object:
    """The op's `peer` argument (a Value) when it names another block, else None."""
    spec = op.prim.effects  # type: ignore[attr-defined]
    v = op.args.get(spec.peer) if spec.peer else None  # type: ignore[attr-defined]
    if v is None or (v.sym is not None and v.sym.const == -1):
        return None
    return v


def multicast_mask(op: object) -> int:
    """The op's constant multicast mask (0: no multicast)."""
    spec = op.prim.effects  # type: ignore[attr-defined]
    v = op.args.get(spec.multicast) if spec.multicast else None  # type: ignore[attr-defined]
    c = v.sym.const if v is not None and v.sym is not None else None
    return c if isinstance(c, int) else 0


#: Who makes a raw mbarrier arrival: every thread of the role, lane 0 of each of its warps
#: (after the warp's lanes meet), or one elected thread of the role.
ARRIVAL_SCOPES = ("thread", "warp", "role")


NO_EFFECTS = EffectSpec()

TypeRule = Callable[["CallContext"], "Type"]


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a registry item came from: hand-written, or promoted from a failure."""

    origin: str = "hand-written"
    date: str = "2026-11-30"
    examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Primitive:
    """One op of CAKE IR and everything the compiler knows about it.

    The type rule, effects, traits, arch support and docs are data on the primitive;
    the cost, simulate and lower facets are named in `facets` (see
    `cake_core.primitives.facets`).  Built-in and plugin primitives are declared alike.
    """

    name: str
    family: str
    params: tuple[ParamSpec, ...]
    type_rule: TypeRule
    doc: str
    _: KW_ONLY
    facets: Facets
    effects: EffectSpec = NO_EFFECTS
    traits: frozenset[Trait] = frozenset()
    requires: frozenset[Feature] = frozenset()
    """Arch features the op needs; an arch without one of them rejects the op (CK104)."""
    unsupported: str = ""
    """What to use instead on an arch that lacks `requires` (the CK104 note)."""
    receiver: type[Type] | None = None
    """For methods (`ab.acquire()`): the receiver's type class; `self` is bound first."""
    signature_doc: str = ""
    provenance: Provenance = field(default_factory=Provenance)
    plugin: str = "cake"

    def facet(self, kind: FacetKind) -> Facet | Unsupported:
        """The `cost`, `simulate` or `lower` facet (a `Lazy` one is imported now).

        Raises `FacetError` when a reference does not resolve: a broken facet is a fault
        the caller reports, not an absent one.
        """
        return self.facets.get(kind)

    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    @property
    def key(self) -> str:
        if self.receiver is None:
            return self.name
        return f"{_receiver_name(self.receiver)}.{self.name}"

    @property
    def signature(self) -> str:
        if self.signature_doc:
            return self.signature_doc
        parts = []
        for p in self.params:
            if p.name == "self":
                continue
            parts.append(p.name if p.required else f"{p.name}={p.default!r}")
        prefix = f"{_receiver_name(self.receiver)}." if self.receiver else ""
        return f"{prefix}{self.name}({', '.join(parts)})"

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""


def _receiver_name(t: type[Type]) -> str:
    return {
        "TensorType": "Tensor", "SmemType": "smem", "PipelineType": "pipeline",
        "BarrierType": "mbarrier", "FragmentType": "fragment", "TileType": "tile",
    }.get(t.__name__, t.__name__)


class DuplicatePrimitiveError(ValueError):
    pass


class Registry:
    """Name -> primitive (functions) and (receiver type, name) -> primitive (methods)."""

    def __init__(self, prims: Iterable[Primitive] = ()) -> None:
        self._funcs: dict[str, Primitive] = {}
        self._methods: dict[tuple[type[Type], str], Primitive] = {}
        for p in prims:
            self.add(p)

    def add(self, prim: Primitive) -> None:
        if prim.receiver is None:
            if prim.name in self._funcs:
                raise DuplicatePrimitiveError(
                    f"primitive {prim.name!r} from {prim.plugin} is already registered by "
                    f"{self._funcs[prim.name].plugin}")
            self._funcs[prim.name] = prim
        else:
            key = (prim.receiver, prim.name)
            if key in self._methods:
                raise DuplicatePrimitiveError(f"method {prim.key!r} is already registered")
            self._methods[key] = prim

    def function(self, name: str) -> Primitive | None:
        return self._funcs.get(name)

    def method(self, receiver: Type, name: str) -> Primitive | None:
        for cls in type(receiver).__mro__:
            p = self._methods.get((cls, name))
            if p is not None:
                return p
        return None

    def methods_of(self, receiver: Type) -> list[Primitive]:
        return [p for (cls, _), p in self._methods.items() if isinstance(receiver, cls)]

    def functions(self) -> list[Primitive]:
        return sorted(self._funcs.values(), key=lambda p: p.name)

    def all(self) -> list[Primitive]:
        return self.functions() + sorted(self._methods.values(), key=lambda p: p.key)

    def suggest(self, name: str, extra: Iterable[str] = ()) -> str | None:
        pool = list(self._funcs) + list(extra)
        hits = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
        return hits[0] if hits else None

    def suggest_method(self, receiver: Type, name: str) -> str | None:
        pool = [p.name for p in self.methods_of(receiver)]
        hits = difflib.get_close_matches(name, pool, n=1, cutoff=0.5)
        return hits[0] if hits else None


_BUILTIN: Registry | None = None

#: The packages that hold the built-in primitive families (`cake_core/ops/<family>/`), each
#: exposing PRIMITIVES.  They sit above the analyses whose contexts their facets use, so the
#: registry loads them by name, as it would a plugin's.
BUILTIN_FAMILIES = ("memory", "copy", "mma", "sync", "math")


def builtin_registry() -> Registry:
    """The built-in primitives (cached; plugin primitives are added on a copy)."""
    global _BUILTIN
    if _BUILTIN is None:
        prims: list[Primitive] = []
        for fam in BUILTIN_FAMILIES:
            mod = importlib.import_module(f"cake_core.ops.{fam}")
            prims.extend(mod.PRIMITIVES)
        _BUILTIN = Registry(prims)
    return _BUILTIN


def extended_registry(extra: Iterable[Primitive]) -> Registry:
    reg = Registry(builtin_registry().all())
    for p in extra:
        reg.add(p)
    return reg
