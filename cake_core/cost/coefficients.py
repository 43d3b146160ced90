"""The cost model's coefficients as one typed record.

Every number the time model reads that the hardware table cannot give is a field of
`Coefficients`, so a coefficient the model needs cannot be absent and a misspelt one cannot
slip in.  The per-family tensor efficiencies and per-kind synchronization latencies are
records of their own; asking one for a family or kind it does not hold is an error naming
it, never a fallback value.

Calibration files and plugin calibrations name coefficients as flat strings
(`"hbm_efficiency"`, `"tensor_efficiency.wgmma"`, `"sync_ns.fence"`); `from_mapping`,
`as_mapping` and `overridden` convert at that boundary and reject unknown or missing names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any


def _doc(text: str) -> dict[str, str]:
    """A field's meaning and unit, kept with the field so that `cake calibrate` can show it."""
    return {"doc": text}


class CoefficientError(ValueError):
    """Coefficients that do not match the model's set (names the unknown or missing ones)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorEfficiency:
    """Achievable fraction of the tensor-core peak per instruction family."""

    wgmma: float = field(metadata=_doc(
        "Scales the tensor-core rate of wgmma (sm_90a); a fraction of the peak."))
    mma_sync: float = field(metadata=_doc(
        "Scales the tensor-core rate of mma.sync; a fraction of the peak."))
    tcgen05: float = field(metadata=_doc(
        "Scales the tensor-core rate of tcgen05 (sm_100a); a fraction of the peak."))

    def of(self, family: str) -> float:
        """The efficiency of `family`; a family this record lacks is a CoefficientError."""
        return _member(self, family, "tensor-core instruction family", TENSOR_FAMILIES)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncLatency:
    """Cost of one synchronization event per kind, before `sync_scale`."""

    mbarrier_wait: float = field(metadata=_doc(
        "An mbarrier / pipeline wait whose phase is complete; ns."))
    mbarrier_arrive: float = field(metadata=_doc(
        "An mbarrier arrive (commit, release, expect_tx); ns."))
    block_barrier: float = field(metadata=_doc("A block-wide barrier (syncthreads); ns."))
    named_barrier: float = field(metadata=_doc("A named barrier (bar.sync id, n); ns."))
    wgmma_wait0: float = field(metadata=_doc("wgmma_wait(0), draining the tensor pipe; ns."))
    async_wait: float = field(metadata=_doc(
        "A group wait (cp_async_wait, tma_store_wait, wgmma_wait(n>0)); ns."))
    fence: float = field(metadata=_doc("A proxy or barrier-init fence; ns."))

    def of(self, kind: str) -> float:
        """The latency of `kind`; a kind this record lacks is a CoefficientError."""
        return _member(self, kind, "synchronization kind", SYNC_KINDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Coefficients:
    """Every coefficient the time model reads, for one GPU."""

    hbm_efficiency: float = field(metadata=_doc(
        "Scales the HBM bandwidth into the DRAM rate; achievable fraction of the HBM "
        "bandwidth."))
    l2_efficiency: float = field(metadata=_doc(
        "Scales the GPU's L2 -> SM bandwidth (hardware table) into the L2 rate; achievable "
        "fraction of it."))
    smem_bytes_per_clk_sm: float = field(metadata=_doc(
        "Shared-memory bandwidth per SM, times the clock gives the smem rate; bytes per clock."))
    tensor_efficiency: TensorEfficiency = field(metadata=_doc(
        "Scales the tensor-core peak, per instruction family; fractions of the peak."))
    tensor_n_half: float = field(metadata=_doc(
        "Instruction N at which wgmma issue overhead halves its efficiency; columns."))
    cuda_efficiency: float = field(metadata=_doc(
        "Scales the FP32 CUDA-core rate; achievable fraction of the peak."))
    pipe_contention: float = field(metadata=_doc(
        "Share of the smaller of a role's tensor and CUDA-core times that its warpgroups "
        "cannot overlap with the larger (issue and register-file contention): 0 is a "
        "perfect overlap, 1 none; a fraction."))
    dram_latency_ns: float = field(metadata=_doc("Round trip of a global load served by DRAM; ns."))
    l2_latency_ns: float = field(metadata=_doc("Round trip of a global load served by L2; ns."))
    sync_scale: float = field(metadata=_doc(
        "Multiplies every synchronization latency in `sync_ns`; dimensionless."))
    sync_ns: SyncLatency = field(metadata=_doc("Cost of one synchronization event, per kind; ns."))
    issue_ns: float = field(metadata=_doc("Issue cost of one bookkeeping instruction; ns."))
    launch_us: float = field(metadata=_doc("Launch overhead of one kernel; us."))
    l2_resident_fraction: float = field(metadata=_doc(
        "Fraction of L2 a re-read tensor may occupy and stay resident; a fraction of L2 bytes."))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> Coefficients:
        """Coefficients from flat names -> numbers holding exactly the model's set."""
        unknown = sorted(set(values) - set(COEFFICIENT_DOCS))
        missing = [n for n in COEFFICIENT_DOCS if n not in values]
        problems = []
        if unknown:
            problems.append(f"unknown coefficient(s): {', '.join(unknown)}")
        if missing:
            problems.append(f"missing coefficient(s): {', '.join(missing)}")
        if problems:
            raise CoefficientError("; ".join(problems))
        return _build(cls, "", values)

    def as_mapping(self) -> dict[str, float]:
        """Flat names -> numbers, in the order of the fields (the JSON form)."""
        return _flatten(self, "")

    def overridden(self, values: Mapping[str, float]) -> Coefficients:
        """These coefficients with the ones `values` names replaced (a partial calibration
        on top of the defaults); an unknown name is a CoefficientError."""
        check_names(values)
        return Coefficients.from_mapping({**self.as_mapping(), **values})


def check_names(values: Mapping[str, float]) -> None:
    """Raise CoefficientError naming every key of `values` that is not a coefficient."""
    unknown = sorted(set(values) - set(COEFFICIENT_DOCS))
    if unknown:
        raise CoefficientError(f"unknown coefficient(s): {', '.join(unknown)}")


def _member(record: Any, name: str, what: str, known: tuple[str, ...]) -> float:
    if name not in known:
        raise CoefficientError(f"no coefficient for {what} {name!r} "
                               f"(known: {', '.join(known)})")
    value: float = getattr(record, name)
    return value


def _build(cls: type, prefix: str, values: Mapping[str, float]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        sub = _NESTED.get(f.name) if not prefix else None
        if sub is not None:
            kwargs[f.name] = _build(sub, f"{f.name}.", values)
        else:
            kwargs[f.name] = float(values[prefix + f.name])
    return cls(**kwargs)


def _flatten(record: Any, prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if is_dataclass(value):
            out.update(_flatten(value, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = value
    return out


#: The instruction families and synchronization kinds the model has coefficients for.
TENSOR_FAMILIES = tuple(f.name for f in fields(TensorEfficiency))
SYNC_KINDS = tuple(f.name for f in fields(SyncLatency))
#: The fields of `Coefficients` that are records keyed by family or kind.
_NESTED: dict[str, type] = {"tensor_efficiency": TensorEfficiency, "sync_ns": SyncLatency}


def _all_docs() -> dict[str, str]:
    out: dict[str, str] = {}
    for f in fields(Coefficients):
        sub = _NESTED.get(f.name)
        if sub is None:
            out[f.name] = f.metadata["doc"]
        else:
            out.update({f"{f.name}.{g.name}": g.metadata["doc"] for g in fields(sub)})
    return out


#: Every coefficient's flat name and what it means, in field order (docs, `cake calibrate`).
COEFFICIENT_DOCS: dict[str, str] = _all_docs()
