"""The verification and timing contract for one candidate on one shape.

Each rule closes a hole that kernel benchmarks have actually fallen into (docs/running.md
tells the stories):

1. Several seeds, each with its own inputs and reference; outputs are filled with 0xFF
   bytes (NaN in every float format, -1 in every integer) before every checked launch, so
   an element the kernel never writes cannot pass by inheriting an old answer.
2. Candidate, then the baseline (the "reference" on the device), then the candidate again:
   a kernel that returns whatever memory the reference left behind, or is right only on
   its first call, fails the second launch.
3. Inputs are compared with what was uploaded after the checked launches and again after
   timing: a kernel that scribbles on its inputs is caught even when its output is right.
4. Timing only for a correct kernel: warmup, then rounds alternating the candidate and the
   baseline in the same process and stream; an L2 flush (a read of a buffer of at least
   twice the L2: a memset would leave dirty lines whose write-back lands inside the timed
   kernel) before every timed call; CUDA events around each call; the result is
   the median of the round medians with the coefficient of variation of all calls.
5. Every launch, checked or timed, is prepared the same way (one slot of buffers with
   inputs restaged and outputs poisoned, then the flush read), so a kernel cannot
   tell them apart; one timed call per round, drawn at random, is judged, and the other
   timed calls run on freshly perturbed inputs, so neither returning early when timed nor
   replaying a cached answer survives.  Correctness is re-checked after the timing loop,
   with fresh poison: state kept across calls or a race that only shows under
   back-to-back launches fails here.
6. The time is set against the shape's roofline floor and the baseline: below the floor,
   or more than 10x faster than the library, is flagged as suspicious, never celebrated.

The protocol talks to a `Device` and a `Launchable` only, so FakeDevice tests exercise it
exactly as a GPU run does.  Running it in a subprocess with a timeout is `runner.py`'s job.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cake_core.run.baselines import Baseline, PreparedBaseline
from cake_core.run.device import Device, DeviceFault, LaunchError
from cake_core.run.kernels import Launchable
from cake_core.run.refcache import ReferenceCache
from cake_core.run.results import (
    FLAG_BASELINE_MISMATCH,
    FLAG_FAKE,
    FLAG_NONDETERMINISTIC,
    Finding,
    ShapeResult,
    Workload,
)
from cake_core.run.tensors import (
    POISON_BYTE,
    RunSetupError,
    TensorSpec,
    from_storage,
    poisoned_mask,
    to_storage,
)
from cake_core.tasks import Arrays, Comparison, Task

Progress = Callable[[str, bool], None]
"""progress(phase, host): called as each phase starts; `host` marks CPU-side phases
(generating inputs, the numpy reference, judging outputs) that a kernel's timeout must not
count."""

CK_WRONG = "CK701"
CK_UNWRITTEN = "CK702"
CK_INPUT_MODIFIED = "CK703"
CK_RECHECK = "CK704"
CK_RUNTIME = "CK705"


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 3
    rounds: int = 5
    calls: int = 10
    """Timed calls per side per round."""
    enabled: bool = True


@dataclass
class _Set:
    """One seed's inputs on the host and in pristine device buffers, its reference and
    its digests.  The kernel never gets these buffers: every launch runs on the shape's
    one slot, restaged from here."""

    seed: int
    host: Arrays
    want: Arrays
    buffers: dict[str, Any]
    digests: dict[str, str]
    scalars: dict[str, Any]


@dataclass(frozen=True)
class _Perturbation:
    """`width` bytes of the slot's `tensor` from `offset` set to `byte`."""

    tensor: str
    offset: int
    width: int
    byte: int


@dataclass
class _Check:
    """One checked launch: per-output comparisons and unwritten counts, output digests,
    and the inputs it changed."""

    comparisons: dict[str, Comparison]
    unwritten: dict[str, tuple[int, tuple[int, ...] | None]]
    digests: dict[str, str]
    modified: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons.values())


@dataclass
class _Side:
    rounds: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    wall_ms: float = 0.0


def _digest(raw: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(raw).view(np.uint8).data, digest_size=16
                           ).hexdigest()


class _ShapeRun:
    """One shape's buffers and launches.

    Every launch of the candidate, checked or timed, looks the same from inside the
    kernel: the same slot of buffers (inputs restaged from a seed's pristine copy, outputs
    poisoned), an L2 flush (a read of the flush buffer, whose bytes never change), then
    the launch.  A kernel therefore cannot tell a checked call from a timed one, and a
    checked call is drawn at random among the timed ones (docs/running.md, "What a
    candidate could do to fake a result")."""

    def __init__(self, device: Device, kernel: Launchable, task: Task, dims: Mapping[str, int],
                 rename: Mapping[str, str], progress: Progress, flush_bytes: int | None,
                 rng: random.Random, refs: ReferenceCache | None = None) -> None:
        self.device = device
        self.kernel = kernel
        self.task = task
        self.dims = dict(dims)
        self.rename = dict(rename)
        self.back = {self.rename.get(n, n): n for n in task.outputs}
        self.progress = progress
        self.specs: dict[str, TensorSpec] = {s.name: s for s in kernel.specs}
        self.outputs = [self.rename.get(n, n) for n in task.outputs]
        self.allocated: list[Any] = []
        self.stream = device.new_stream()
        self.checks = 0
        self.rng = rng
        self.slot: dict[str, Any] = {}
        self.nflush = max(flush_bytes or 0, 2 * device.l2_bytes, 1)
        self.flush: Any = None
        self.flush_byte = 0
        self.refs = refs

    # --- setup -----------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        buf = self.device.alloc(nbytes)
        self.allocated.append(buf)
        return buf

    def make_set(self, seed: int) -> _Set:
        cached = self.refs.load(self.task, self.dims, seed) if self.refs else None
        if cached is not None:
            host, want = cached
        else:
            host = self.task.inputs(self.dims, np.random.default_rng(seed))
            want = self.task.reference(host, self.dims)
            if self.refs is not None:
                self.refs.store(self.task, self.dims, seed, host, want)
        missing = [k for k in self.outputs if k not in self.specs]
        if missing:
            raise RunSetupError(f"the kernel has no tensor for the task's output(s) "
                                f"{', '.join(missing)}")
        buffers: dict[str, Any] = {}
        digests: dict[str, str] = {}
        scalars: dict[str, Any] = {}
        for name, value in host.items():
            kname = self.rename.get(name, name)
            spec = self.specs.get(kname)
            if spec is None:
                if np.ndim(value) == 0:
                    scalars[kname] = value
                    continue
                raise RunSetupError(f"the task's input {name} has no tensor parameter "
                                    f"`{kname}` in the kernel")
            shape = spec.dims_shape(self.dims)
            if tuple(np.shape(value)) != shape:
                raise RunSetupError(f"input {name} has shape {tuple(np.shape(value))}, the "
                                    f"kernel declares {shape} for {self._dims_text()}")
            storage = to_storage(value, spec.dtype)
            buf = self.alloc(storage.nbytes)
            self.device.upload(buf, storage)
            buffers[kname] = buf
            digests[kname] = _digest(storage)
        for kname in self.outputs:
            spec = self.specs[kname]
            shape = spec.dims_shape(self.dims)
            w = want[self.back[kname]]
            if tuple(np.shape(w)) != shape:
                raise RunSetupError(f"the reference's {self.back[kname]} has shape "
                                    f"{tuple(np.shape(w))}, the kernel declares {shape}")
        unbound = [s for s in self.specs if s not in buffers and s not in self.outputs]
        if unbound:
            raise RunSetupError(f"kernel tensor(s) {', '.join(unbound)} are neither inputs nor "
                                f"outputs of task {self.task.name}")
        if not self.slot:
            for kname, spec in self.specs.items():
                self.slot[kname] = self.alloc(spec.nbytes(self.dims))
            self.flush = self.alloc(self.nflush)
            # filled once, with a random non-zero byte, long before anything is timed: the
            # flushes only read it, so it looks the same to every launch, checked or timed
            self.flush_byte = self.rng.randrange(1, 256)
            self.device.fill(self.flush, self.flush_byte, self.nflush, self.stream)
        return _Set(seed, host, want, buffers, digests, scalars)

    def _dims_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims.items())

    # --- launches --------------------------------------------------------------------------
    def prepare(self, s: _Set, *, perturb: bool = False) -> _Perturbation | None:
        """Restage `s`'s inputs into the slot, poison the outputs, flush L2.

        `perturb` overwrites a random run of bytes of one floating-point input with a
        random value, so the kernel runs on inputs it has never seen and replaying a
        cached answer cannot make it fast; returns what was changed."""
        for kname, buf in s.buffers.items():
            self.device.copy(self.slot[kname], buf, self.specs[kname].nbytes(self.dims),
                             self.stream)
        change = None
        if perturb:
            floats = [k for k in s.buffers if self.specs[k].dtype.value.startswith(("f", "bf"))]
            if floats:
                kname = self.rng.choice(floats)
                total = self.specs[kname].nbytes(self.dims)
                width = min(total, 256)
                offset = self.rng.randrange(0, total - width + 1)
                # 0x3C..0x3F: a modest finite value in every float format
                change = _Perturbation(kname, offset, width, self.rng.randrange(0x3C, 0x40))
                self.device.fill(self.slot[kname], change.byte, width, self.stream, offset)
        for kname in self.outputs:
            self.device.fill(self.slot[kname], POISON_BYTE, self.specs[kname].nbytes(self.dims),
                             self.stream)
        # last, after the restaging and the poison: reading >= 2x L2 evicts what the
        # previous call and those writes left there, their write-back happens in this
        # read, and the next kernel starts on an L2 of clean lines
        self.flush_l2()
        return change

    def flush_l2(self) -> None:
        self.device.read_through(self.flush, self.nflush, self.stream)

    def perturbed(self, s: _Set, change: _Perturbation) -> _Set:
        """`s` with `change` applied on the host, and its own reference (a CPU phase)."""
        self.progress("reference for a perturbed timed call", True)
        tname = next((t for t, k in self.rename.items() if k == change.tensor), change.tensor)
        spec = self.specs[change.tensor]
        raw = to_storage(s.host[tname], spec.dtype).view(np.uint8).reshape(-1).copy()
        raw[change.offset:change.offset + change.width] = change.byte
        host = dict(s.host)
        host[tname] = from_storage(raw, spec.dtype, spec.dims_shape(self.dims))
        digests = dict(s.digests)
        digests[change.tensor] = _digest(raw)
        return _Set(s.seed, host, self.task.reference(host, self.dims), s.buffers, digests,
                    s.scalars)

    def launch(self, s: _Set) -> None:
        self.kernel.launch(self.device, self.slot, self.dims, s.scalars, self.stream)

    def checked(self, s: _Set) -> _Check:
        """Prepare, launch, wait, judge every output and every input."""
        self.progress("launch", False)
        self.prepare(s)
        self.launch(s)
        self.device.synchronize()
        return self.judge(s)

    def judge(self, s: _Set) -> _Check:
        """The slot's outputs against `s`'s reference, its inputs against `s`'s upload."""
        self.checks += 1
        self.progress("judge", True)
        comps: dict[str, Comparison] = {}
        unwritten: dict[str, tuple[int, tuple[int, ...] | None]] = {}
        digests: dict[str, str] = {}
        for kname in self.outputs:
            spec = self.specs[kname]
            shape = spec.dims_shape(self.dims)
            raw = self.device.download(self.slot[kname], spec.nbytes(self.dims))
            digests[kname] = _digest(raw)
            got = from_storage(raw, spec.dtype, shape)
            tname = self.back[kname]
            comps[kname] = self.task.judge(tname, got, s.want[tname], s.host, self.dims,
                                           spec.dtype.value)
            mask = poisoned_mask(raw, spec.dtype, shape)
            n = int(mask.sum())
            first = tuple(int(i) for i in np.argwhere(mask)[0]) if n else None
            unwritten[kname] = (n, first)
        return _Check(comps, unwritten, digests, self.modified_inputs(s))

    def flush_touched(self) -> Finding | None:
        """The flush buffer must still hold the byte it was filled with."""
        raw = self.device.download(self.flush, self.nflush)
        bad = raw != self.flush_byte
        n = int(bad.sum())
        if not n:
            return None
        return Finding(CK_INPUT_MODIFIED,
                       f"the kernel wrote into the runner's L2 flush buffer: {n} byte(s) "
                       f"differ from the fill, first at byte {int(np.argmax(bad))} "
                       f"({self._dims_text()})",
                       ["a kernel may write only its outputs; the flush buffer is read "
                        "before every launch to evict L2, and is checked after every round"],
                       {"tensor": "<l2 flush>", "changed": n})

    def modified_inputs(self, s: _Set) -> list[Finding]:
        out = []
        for kname, digest in s.digests.items():
            spec = self.specs[kname]
            raw = self.device.download(self.slot[kname], spec.nbytes(self.dims))
            if _digest(raw) == digest:
                continue
            tname = next((t for t, k in self.rename.items() if k == kname), kname)
            orig = to_storage(s.host[tname], spec.dtype).view(np.uint8).reshape(
                -1, spec.dtype.bytes)
            now = raw.reshape(-1, spec.dtype.bytes)
            changed = np.any(orig != now, axis=1)
            n = int(changed.sum())
            idx = np.unravel_index(int(np.argmax(changed)), spec.dims_shape(self.dims))
            where = ", ".join(str(int(i)) for i in idx)
            out.append(Finding(CK_INPUT_MODIFIED,
                               f"the kernel changed its input `{kname}`: {n} element(s) differ "
                               f"from what was uploaded, first `{kname}[{where}]` "
                               f"(seed {s.seed}, {self._dims_text()})",
                               ["inputs are read-only: a kernel that writes them corrupts the "
                                "caller's data and can fool a reference that runs after it"],
                               {"tensor": kname, "changed": n, "first": [int(i) for i in idx],
                                "seed": s.seed}))
        return out


def _output_findings(run: _ShapeRun, s: _Set, chk: _Check, when: str, code: str,
                     extra: Sequence[str] = ()) -> list[Finding]:
    out = []
    for kname, c in chk.comparisons.items():
        if c.passed:
            continue
        n_unwritten, first_unwritten = chk.unwritten[kname]
        idx = ", ".join(str(i) for i in c.first_bad) if c.first_bad is not None else "?"
        data = {"tensor": kname, "seed": s.seed, "dims": dict(run.dims), "bad": c.bad,
                "unwritten": n_unwritten, "max_abs": c.max_abs, "max_rel": c.max_rel,
                "first_bad": list(c.first_bad or ()), "when": when}
        notes = list(extra)
        if c.detail:
            notes.append(c.detail)
        this_code = code
        if code == CK_WRONG and n_unwritten and n_unwritten >= c.bad:
            this_code = CK_UNWRITTEN
            where = ", ".join(str(i) for i in first_unwritten or ())
            msg = (f"`{kname}` has {n_unwritten} element(s) the kernel never wrote "
                   f"({when}, seed {s.seed}, {run._dims_text()}): `{kname}[{where}]` still "
                   "holds the poison")
            notes.append("every output element was filled with 0xFF bytes before the launch")
        else:
            got = "" if c.got is None else f" is {c.got:g}, the reference {c.want:g}"
            msg = (f"`{kname}` differs from the reference at {c.bad} element(s) ({when}, seed "
                   f"{s.seed}, {run._dims_text()}): `{kname}[{idx}]`{got}")
            notes.append(f"max abs error {c.max_abs:.3g}, max rel error {c.max_rel:.3g}")
            if n_unwritten:
                notes.append(f"{n_unwritten} of the wrong elements were never written")
        out.append(Finding(this_code, msg, notes, data))
    return out


def _worst(result: ShapeResult, chk: _Check) -> None:
    for c in chk.comparisons.values():
        if c.max_abs == c.max_abs:
            result.max_abs = max(result.max_abs, c.max_abs)
        if c.max_rel == c.max_rel:
            result.max_rel = max(result.max_rel, c.max_rel)


def _once_per_tensor(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per changed tensor (one bug, one finding), the first seen."""
    seen: set[str] = set()
    out = []
    for f in findings:
        key = str(f.data.get("tensor"))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def run_shape(device: Device, kernel: Launchable, task: Task, dims: Mapping[str, int], *,
              label: str = "", rename: Mapping[str, str] | None = None,
              seeds: Sequence[int] = (0, 1), baseline: Baseline | None = None,
              timing: TimingConfig | None = None, workload: Workload | None = None,
              flush_bytes: int | None = None, progress: Progress | None = None,
              rng: random.Random | None = None,
              reference_cache: Path | None = None) -> ShapeResult:
    """Check, time and re-check `kernel` on one shape; never raises for a kernel's fault.

    A fault that leaves the device unusable sets `device_lost` on the result.  `rng`
    draws the checked timed calls, the perturbations and the flush byte; it is seeded
    from the OS unless a test passes one.  `reference_cache`: a directory where each seed's
    inputs and reference are kept for the next candidate on this shape (`refcache.py`).
    """
    timing = timing or TimingConfig()
    progress = progress or (lambda _phase, _host: None)
    rng = rng or random.Random(os.urandom(16))
    result = ShapeResult(dict(dims), label, seeds=list(seeds), workload=workload)
    result.baseline = baseline.description if baseline is not None else task.baseline
    if device.fake:
        result.flags.append(FLAG_FAKE)
    run: _ShapeRun | None = None
    prepared: PreparedBaseline | None = None
    try:
        kernel.check_dims(dims)
        run = _ShapeRun(device, kernel, task, dims, rename or {}, progress, flush_bytes, rng,
                        ReferenceCache(reference_cache) if reference_cache else None)
        sets = []
        for seed in seeds:
            progress(f"inputs and reference, seed {seed}", True)
            sets.append(run.make_set(seed))
        dtypes = {t: run.specs[run.rename.get(t, t)].dtype for t in
                  [*sets[0].host, *task.outputs] if run.rename.get(t, t) in run.specs}
        # candidate -> reference -> candidate
        first = [run.checked(s) for s in sets]
        if baseline is not None:
            progress("baseline", False)
            prepared = baseline.prepare(device, run.stream, sets[0].host, run.dims, dtypes)
            prepared.launch()
            device.synchronize()
            got = prepared.outputs()
            prepared.scrub()  # the library's answer is not left for the candidate to find
            result.baseline_correct = all(
                task.judge(n, got[n], sets[0].want[n], sets[0].host, run.dims,
                           dtypes[n].value).passed for n in task.outputs if n in got)
            if not result.baseline_correct:
                result.flags.append(FLAG_BASELINE_MISMATCH)
        second = [run.checked(s) for s in sets]
        findings: list[Finding] = []
        for s, a, b in zip(sets, first, second, strict=True):
            _worst(result, a)
            _worst(result, b)
            if not a.passed:
                findings += _output_findings(run, s, a, "first launch", CK_WRONG)
            elif not b.passed:
                findings += _output_findings(
                    run, s, b, "second launch", CK_WRONG,
                    ["the first launch on these inputs was right: a kernel must compute its "
                     "whole output on every call (no state kept across calls)"])
            elif a.digests != b.digests:
                result.flags.append(FLAG_NONDETERMINISTIC)
        progress("inputs unchanged?", True)
        findings += _once_per_tensor([f for c in [*first, *second] for f in c.modified])
        result.findings = findings
        if findings:
            result.correct, result.status = False, "wrong"
            return result
        if timing.enabled:
            later = _time(run, sets, prepared, timing, result)
            progress("recheck", False)
            for s in sets:
                chk = run.checked(s)
                _worst(result, chk)
                if not chk.passed:
                    later += _output_findings(
                        run, s, chk, "re-check after timing", CK_RECHECK,
                        ["the output was right before the timing loop: state kept across "
                         "calls, or a race that shows under back-to-back launches"])
                later += chk.modified
            result.findings += _once_per_code_and_tensor(later)
        result.correct = not result.findings
        result.status = "ok" if result.correct else "wrong"
        if not result.correct:
            result.candidate_ms = None  # a time for a wrong kernel means nothing
        result.assess()
        return result
    except RunSetupError as exc:
        result.status, result.error = "error", str(exc)
        return result
    except LaunchError as exc:
        _runtime(result, f"launch failed: {exc}", dims)
        return result
    except DeviceFault as exc:
        _runtime(result, f"the GPU reported an error: {exc}", dims)
        result.device_lost = True
        return result
    finally:
        if prepared is not None:
            prepared.release()
        if run is not None and not result.device_lost:
            for buf in run.allocated:
                device.free(buf)


def _once_per_code_and_tensor(findings: Sequence[Finding]) -> list[Finding]:
    """The first finding of each (code, tensor): a kernel that stops computing fails every
    later check the same way, and one bug is one finding."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.code, str(f.data.get("tensor")))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _runtime(result: ShapeResult, message: str, dims: Mapping[str, int]) -> None:
    result.status, result.correct, result.error = "error", False, message
    result.candidate_ms = None
    text = ",".join(f"{k}={v}" for k, v in dims.items())
    result.findings.append(Finding(CK_RUNTIME, f"{message} ({text})", [],
                                   {"dims": dict(dims)}))


def _order(rng: random.Random, nsets: int, n: int) -> list[int]:
    """Which seed's inputs each of `n` calls runs on: random, never the same seed twice
    in a row when there are two or more, so the slot's contents change under the kernel
    before every call."""
    out: list[int] = []
    for _ in range(n):
        choices = [i for i in range(nsets) if nsets < 2 or not out or i != out[-1]]
        out.append(rng.choice(choices))
    return out


def _time(run: _ShapeRun, sets: list[_Set], prepared: PreparedBaseline | None,
          cfg: TimingConfig, result: ShapeResult) -> list[Finding]:
    """Warmup and timing rounds; returns what the checked timed calls found.

    In each round one candidate call, drawn at random, is also judged (outputs and
    inputs); every other timed call runs on freshly perturbed inputs.  A kernel that
    returns early, replays a cached answer or writes nothing when it believes it is
    being timed is caught by the judged call, or timed at the cost of real work."""
    device = run.device
    n = max(1, cfg.calls)
    starts = [device.new_event() for _ in range(n)]
    ends = [device.new_event() for _ in range(n)]
    found: list[Finding] = []
    order: list[int] = []
    judged = -1
    perturb_judged = False
    # one round, drawn at random, judges a perturbed call against its own reference
    # (one extra reference per shape): a cache keyed on part of the inputs is caught there
    perturbed_round = run.rng.randrange(max(1, cfg.rounds))

    changes: list[_Perturbation | None] = [None] * n

    def candidate(i: int) -> None:
        changes[i] = run.prepare(sets[order[i]], perturb=i != judged or perturb_judged)
        device.record(starts[i], run.stream)
        run.launch(sets[order[i]])
        device.record(ends[i], run.stream)

    def base(i: int) -> None:
        assert prepared is not None
        run.flush_l2()
        device.record(starts[i], run.stream)
        prepared.launch()
        device.record(ends[i], run.stream)

    sides: list[tuple[str, Callable[[int], None], _Side]] = [("candidate", candidate, _Side())]
    if prepared is not None:
        sides.append(("baseline", base, _Side()))
    run.progress("warmup", False)
    order, judged = _order(run.rng, len(sets), n), -1
    for w in range(cfg.warmup):
        for name, fn, _side in sides:
            fn(w % n)
            if name == "baseline" and prepared is not None:
                prepared.scrub()
    device.synchronize()
    for r in range(max(1, cfg.rounds)):
        run.progress(f"round {r + 1}", False)
        ordered = sides if r % 2 == 0 else list(reversed(sides))
        for name, fn, side in ordered:
            is_cand = name == "candidate"
            if is_cand:
                order, judged = _order(run.rng, len(sets), n), run.rng.randrange(n)
                perturb_judged = r == perturbed_round
            t0 = time.perf_counter()
            judge_s = 0.0
            for c in range(n):
                fn(c)
                if is_cand and c == judged:
                    device.synchronize()
                    j0 = time.perf_counter()
                    change = changes[c]
                    against = sets[order[c]] if change is None else \
                        run.perturbed(sets[order[c]], change)
                    chk = run.judge(against)
                    _worst(result, chk)
                    if not chk.passed:
                        found += _output_findings(
                            run, against, chk, f"timed call {c + 1} of round {r + 1}",
                            CK_RECHECK,
                            ["this call was drawn at random among the timed calls and "
                             "judged: a kernel must do the same work whether or not it is "
                             "timed"])
                    found += chk.modified
                    run.progress(f"round {r + 1}", False)
                    judge_s += time.perf_counter() - j0
            device.synchronize()  # every stream of the device, not just ours
            side.wall_ms += (time.perf_counter() - t0 - judge_s) * 1e3
            if is_cand:
                touched = run.flush_touched()
                if touched is not None:
                    found.append(touched)
            elif prepared is not None:
                prepared.scrub()
            times = [device.elapsed_ms(starts[c], ends[c]) for c in range(n)]
            side.samples += times
            side.rounds.append(statistics.median(times))
    cand = sides[0][2]
    result.candidate_ms = statistics.median(cand.rounds)
    result.rounds_ms = list(cand.rounds)
    result.cv = _cv(cand.samples)
    result.overhead_ms = max(0.0, cand.wall_ms / len(cand.samples) - statistics.fmean(
        cand.samples)) if not device.fake else None
    if prepared is not None:
        b = sides[1][2]
        result.baseline_ms = statistics.median(b.rounds)
        result.baseline_cv = _cv(b.samples)
    return found


def _cv(samples: list[float]) -> float | None:
    if len(samples) < 2:
        return None
    mean = statistics.fmean(samples)
    return statistics.pstdev(samples) / mean if mean > 0 else None
