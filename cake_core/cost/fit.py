"""Fitting the cost model's coefficients to measured runs.

A run is a kernel file, its dims, the GPU it ran on and the measured time.  The fit is a
least-squares problem on log time (a 2x miss weighs the same on a 5 us kernel and on a
5 ms one), solved by Levenberg-Marquardt in log-coefficient space (coefficients stay
positive; efficiencies are held at or below 1).  Each run is profiled once; only
`estimate` runs inside the loop, so a fit over dozens of runs takes seconds.

A coefficient that no run is sensitive to (no kernel of the set is ever bound by it) is
left at its prior value and reported as unconstrained, rather than drifting freely.

The loop is hand-written rather than `scipy.optimize.least_squares` because the library is
not better here: with the same residuals, bounds and difference step, `trf` and `dogbox`
reach the same minimum as this loop on the calibration test's runs, with and without 10 %
noise (same objective to four digits, coefficients within 1e-8), while taking as long or
longer (150-192 ms against 73-167 ms) and costing a ~140 MB dependency and ~0.9 s of import.
docs/cost.md records the comparison.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cake_core.cost.calibration import (
    DEFAULT_FIT,
    Calibration,
    CalibrationProvenance,
    default_coefficients,
)
from cake_core.cost.coefficients import Coefficients
from cake_core.cost.model import CostError, KernelProfile, estimate, profile
from cake_core.hardware import GpuSpec, default_gpu, get_arch, get_gpu
from cake_core.source import SourceFile

#: Coefficients that are fractions of a peak: the fit keeps them in (0, 1].
_FRACTIONS = ("hbm_efficiency", "tensor_efficiency.", "cuda_efficiency",
              "l2_resident_fraction", "l2_efficiency", "pipe_contention")


class RunError(ValueError):
    """A results file entry that cannot be used (says which and why)."""


@dataclass(slots=True)
class Run:
    kernel_file: str
    kernel_name: str
    dims: dict[str, int]
    gpu: GpuSpec
    measured_s: float
    profile: KernelProfile

    @property
    def arch(self) -> str:
        return self.profile.arch.name

    def describe(self) -> dict[str, Any]:
        return {"kernel": self.kernel_file, "name": self.kernel_name, "dims": dict(self.dims),
                "gpu": self.gpu.name, "measured_ms": self.measured_s * 1e3}


def parse_dims(spec: str | Mapping[str, Any]) -> dict[str, int]:
    """`"M=4096,N=4096"` or a mapping -> {name: int}; ValueError on anything else."""
    items: list[tuple[str, Any]]
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in str(spec).replace(" ", ",").split(","):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name:
                raise ValueError(f"dims are NAME=INT, not {part!r}")
            items.append((name, value))
    out: dict[str, int] = {}
    for name, value in items:
        try:
            v = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"dim {name} must be an integer, not {value!r}") from None
        if v < 0:
            raise ValueError(f"dim {name} must be >= 0, not {v}")
        out[str(name)] = v
    return out


def load_runs(path: str | Path) -> list[Run]:
    """Runs from a JSON list of {kernel, dims, arch or gpu, measured_ms[, name]}.

    Kernel paths are relative to the results file (or absolute).  Raises RunError.
    """
    # an upward import the layers contract lists (pyproject.toml): text-in entry point
    from cake_core.check import check_source

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise RunError(f"{path}: expected a non-empty JSON list of runs")
    cache: dict[tuple[str, str | None], Any] = {}
    runs: list[Run] = []
    for n, entry in enumerate(data):
        where = f"{path}: run {n}"
        if not isinstance(entry, dict):
            raise RunError(f"{where}: expected an object")
        for key in ("kernel", "measured_ms"):
            if key not in entry:
                raise RunError(f"{where}: missing `{key}`")
        kfile = Path(str(entry["kernel"]))
        if not kfile.is_absolute():
            local = path.parent / kfile
            kfile = local if local.exists() else kfile
        measured = entry["measured_ms"]
        if not isinstance(measured, int | float) or not measured > 0:
            raise RunError(f"{where}: measured_ms must be a positive number")
        gpu: GpuSpec | None = None
        if entry.get("gpu"):
            gpu = get_gpu(str(entry["gpu"]))
            if gpu is None:
                raise RunError(f"{where}: unknown gpu {entry['gpu']!r}")
        arch = entry.get("arch")
        if arch is not None and get_arch(str(arch)) is None:
            raise RunError(f"{where}: unknown arch {arch!r}")
        program_key = (str(kfile), str(arch) if arch else None)
        if program_key not in cache:
            try:
                src = SourceFile.read(kfile, str(entry["kernel"]))
            except OSError as exc:
                raise RunError(f"{where}: cannot read {kfile}: {exc.strerror}") from exc
            res = check_source(src, arch=str(arch) if arch else None)
            if res.errors or res.program is None or not res.program.kernels:
                raise RunError(f"{where}: {entry['kernel']} does not check clean")
            cache[program_key] = res.program
        program = cache[program_key]
        kernels = program.kernels
        if entry.get("name"):
            kernels = [k for k in kernels if k.name == entry["name"]]
            if not kernels:
                raise RunError(f"{where}: no kernel named {entry['name']!r}")
        kernel = kernels[0]
        try:
            dims = parse_dims(entry.get("dims") or {})
        except ValueError as exc:
            raise RunError(f"{where}: {exc}") from exc
        gpu = gpu or default_gpu(str(arch) if arch else kernel.arch)
        try:
            prof = profile(kernel, dims, gpu)
        except CostError as exc:
            raise RunError(f"{where}: {exc}") from exc
        runs.append(Run(str(entry["kernel"]), kernel.name, dims, gpu, float(measured) * 1e-3,
                        prof))
    return runs


@dataclass(slots=True)
class FitResult:
    arch: str
    coefficients: Coefficients
    """The prior with the fitted values in place: what the model prices with after the fit."""
    fitted: dict[str, float]
    """The fitted values by name, only the parameters that were fitted (what a calibration
    records)."""
    unconstrained: list[str]
    predicted_before: list[float]
    predicted_after: list[float]
    measured: list[float]
    iterations: int

    @staticmethod
    def _rms(pred: Sequence[float], meas: Sequence[float]) -> float:
        if not meas:
            return 0.0
        return math.sqrt(sum(math.log(p / m) ** 2 for p, m in zip(pred, meas, strict=True))
                         / len(meas))

    @staticmethod
    def _max_pct(pred: Sequence[float], meas: Sequence[float]) -> float:
        return max((abs(p / m - 1) * 100 for p, m in zip(pred, meas, strict=True)), default=0.0)

    def errors(self) -> dict[str, float]:
        return {
            "runs": float(len(self.measured)),
            "rms_log_error_before": self._rms(self.predicted_before, self.measured),
            "rms_log_error": self._rms(self.predicted_after, self.measured),
            "max_abs_pct_error_before": self._max_pct(self.predicted_before, self.measured),
            "max_abs_pct_error": self._max_pct(self.predicted_after, self.measured),
        }


def _is_fraction(name: str) -> bool:
    return any(name == f or (f.endswith(".") and name.startswith(f)) for f in _FRACTIONS)


def _predict_all(runs: Sequence[Run], coeffs: Mapping[str, float]) -> list[float]:
    c = Coefficients.from_mapping(coeffs)
    return [estimate(r.profile, c).seconds for r in runs]


def fit_runs(runs: Sequence[Run], params: Sequence[str] = DEFAULT_FIT,
             prior: Coefficients | None = None, *, max_iter: int = 60,
             prior_weight: float = 0.02, bound: float = 20.0) -> FitResult:
    """Least squares on log time over `runs` (one architecture) for `params`.

    `prior` (default: the GPU defaults of the first run) gives the starting point and the
    value of everything not fitted.  Each fitted coefficient stays within a factor `bound`
    of its prior and is pulled towards it with `prior_weight` per unit of log change: a
    coefficient the runs barely constrain stays near its prior instead of running off to
    whatever absorbs the last bit of residual.  The search runs on flat name -> value
    vectors; the result carries the whole set as `Coefficients`.
    """
    if not runs:
        raise ValueError("no runs to fit")
    arches = {r.arch for r in runs}
    if len(arches) != 1:
        raise ValueError(f"runs span several architectures: {sorted(arches)}")
    base = (prior or default_coefficients(runs[0].gpu)).as_mapping()
    unknown = [p for p in params if p not in base]
    if unknown:
        raise ValueError(f"unknown coefficient(s): {', '.join(unknown)}")
    measured = [r.measured_s for r in runs]
    y = np.log(np.array(measured))
    before = _predict_all(runs, base)
    names = list(dict.fromkeys(params))

    def resid(x: np.ndarray, active: list[str]) -> np.ndarray:
        c = dict(base)
        for name, v in zip(active, x, strict=True):
            c[name] = float(np.exp(v))
        fit = np.log(np.array(_predict_all(runs, c))) - y
        x0 = np.log(np.array([base[n] for n in active], dtype=float))
        return np.concatenate([fit, prior_weight * (x - x0)])

    def jac(x: np.ndarray, r0: np.ndarray, active: list[str]) -> np.ndarray:
        cols = []
        for j in range(len(x)):
            h = 1e-4
            xh = x.copy()
            xh[j] += h
            cols.append((resid(xh, active) - r0) / h)
        return np.stack(cols, axis=1)

    x = np.log(np.array([base[n] for n in names], dtype=float))
    r = resid(x, names)
    # parameters no run responds to stay at their prior
    j0 = jac(x, r, names)[: len(runs)]
    sens = np.abs(j0).max(axis=0)
    active = [n for n, s in zip(names, sens, strict=True) if s > 1e-3]
    unconstrained = [n for n in names if n not in active]
    x = np.log(np.array([base[n] for n in active], dtype=float))
    x0 = x.copy()
    upper = np.minimum(x0 + math.log(bound), [0.0 if _is_fraction(n) else np.inf
                                               for n in active])
    lower = x0 - math.log(bound)
    lam = 1e-2
    r = resid(x, active)
    cost = float(r @ r)
    it = 0
    done = False
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        if not active:
            break
        j = jac(x, r, active)
        a = j.T @ j
        g = j.T @ r
        improved = False
        for _ in range(12):
            step = np.linalg.solve(a + lam * (np.diag(np.diag(a)) + 1e-9 * np.eye(len(x))), -g)
            xn = np.clip(x + np.clip(step, -1.0, 1.0), lower, upper)
            rn = resid(xn, active)
            cn = float(rn @ rn)
            if cn < cost:
                improved = True
                done = cost - cn < 1e-12 * max(1.0, cost)
                x, r, cost, lam = xn, rn, cn, max(lam / 3, 1e-9)
                break
            lam *= 4
        if not improved or done:
            break
    fitted = {n: float(np.exp(v)) for n, v in zip(active, x, strict=True)}
    result = Coefficients.from_mapping({**base, **fitted})
    after = [estimate(r.profile, result).seconds for r in runs]
    return FitResult(runs[0].arch, result, fitted, unconstrained, before, after, measured, it)


def calibrate(runs: Sequence[Run], *, name: str = "calibration",
              params: Sequence[str] = DEFAULT_FIT, origin: str = "cake calibrate",
              source: str = "") -> list[tuple[Calibration, FitResult]]:
    """One calibration per architecture among the runs, each with its provenance."""
    by_arch: dict[str, list[Run]] = {}
    for r in runs:
        by_arch.setdefault(r.arch, []).append(r)
    out = []
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    for arch, group in sorted(by_arch.items()):
        res = fit_runs(group, params)
        cal_name = name if len(by_arch) == 1 else f"{name}-{arch}"
        gpus = sorted({r.gpu.name for r in group})
        prov = CalibrationProvenance(
            origin=origin + (f" {source}" if source else ""), date=date,
            runs=tuple({**r.describe(), "predicted_ms": p * 1e3}
                       for r, p in zip(group, res.predicted_after, strict=True)),
            fit_error={**res.errors(), "iterations": float(res.iterations)})
        cal = Calibration(cal_name, arch, res.fitted, prov,
                          gpus[0] if len(gpus) == 1 else None)
        out.append((cal, res))
    return out
