"""The time model: a profile and coefficients -> seconds, credited to ops and categories.

Per wave of resident blocks:

- steady state (`_Pricing.throughput`, `latency_bound`, `role_chains`, combined by
  `overlap`) = the largest of: tensor-core time, CUDA-core time, shared-memory and L2->SM
  bandwidth (each summed over the blocks sharing an SM), DRAM time of the wave's distinct
  bytes, the pipeline latency bound (Little's law over the buffers: each of the `stages`
  buffers cycles through a round trip and the iteration that consumes it), and each
  role's own chain of compute, synchronization and issue (`role_chains`: roles overlap
  each other; within a role only the CUDA-core work issued while one of its wgmma groups
  is in flight overlaps its tensor work, `overlapped_cuda` says which; the two pipes then
  share issue slots and register-file ports, the `pipe_contention` share; warpgroups
  staggered by named barriers overlap one's MMA with another's math);
- plus what cannot overlap: the pipeline fill (`fill`: one round trip and the first
  stage; only once for a persistent kernel whose producer runs ahead across tiles), loads
  every iteration waits for (`waited`; `exposure.py` says which), the prologue and
  epilogue ops (`serial`; those outside a persistent kernel's tile loop once per block);
- waves run one after another (`wave`; the last one possibly partial: the tail), and the
  launch overhead comes once.

Every second of the total is credited to the ops (and so to source lines) that caused
it, and to a category: compute, memory, latency, sync or launch; the largest category is
the bottleneck.  Credits are made in a fixed order, so a prediction is reproducible to
the last bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cake_core.cost.calibration import UNCALIBRATED, Calibration, default_coefficients
from cake_core.cost.coefficients import Coefficients
from cake_core.cost.exposure import barrier_key
from cake_core.cost.prediction import CATEGORIES, Prediction, bottleneck_detail, line_shares
from cake_core.cost.record import FREE, MUFU_WEIGHT, ONCE, PIPELINED, SERIAL, CostRecord
from cake_core.cost.work import STEADY, KernelProfile, OpWork, WaveShape
from cake_core.hardware import GpuSpec
from cake_core.ir.types import PipelineType
from cake_core.primitives.registry import PipeAction
from cake_core.verify.register_estimate import ALL_WARPS

Term = tuple[float, list[int], list[float], str]
"""One bound of a wave's steady state: (seconds, the ops it is spread over, their
weights, the category it is credited to)."""
MEMORIES = ("dram", "l2", "smem")
#: Tensor-core instruction families that run asynchronously to the issuing warps.
ASYNC_MMA = frozenset({"wgmma", "tcgen05"})
Chain = tuple[float, list[int], list[float], list[float]]
"""A role's own chain: its seconds, its steady ops, their compute and their
synchronization seconds."""


@dataclass(slots=True)
class _Rates:
    clock: float
    sms: int
    hbm: float
    l2_sm: float
    smem_sm: float
    cuda_sm: float
    l_dram: float
    l_l2: float


def _tensor_rate(p: KernelProfile, c: Coefficients, dtype: str, family: str,
                 n: int) -> float:
    gpu = p.gpu
    peak = gpu.tensor_peak.get(dtype) or gpu.tensor_peak.get("bf16") or 1e12
    eff = c.tensor_efficiency.of(family)
    ach = gpu.achievable
    if dtype in ach and "bf16" in ach and dtype not in ("bf16", "f16"):
        eff *= ach[dtype] / ach["bf16"]
    if family == "wgmma":
        h = c.tensor_n_half
        eff *= (n / (n + h)) / (256 / (256 + h))
    return peak / gpu.sms * max(eff, 1e-6)


def _cuda_seconds(times: list[_OpTimes], ops: list[OpWork], idx: list[int]) -> float:
    """CUDA-core time of the ops `idx`: the FP32 lanes and the multi-function unit are two
    pipes that run side by side (each transcendental also holds an FP32 issue slot, which
    `cuda` counts), so the longer of the two binds."""
    return max(sum(times[i].cuda * ops[i].execs for i in idx),
               sum(times[i].mufu * ops[i].execs for i in idx))


def _sync_seconds(rec: CostRecord, c: Coefficients) -> float:
    scale = c.sync_scale
    return sum(cnt * c.sync_ns.of(kind) for kind, cnt in rec.sync) * scale * 1e-9


class _OpTimes:
    """Per-op, per-execution times under one set of coefficients (seconds, one block)."""

    __slots__ = ("cuda", "issue", "l2", "mufu", "smem", "sync", "tc")

    def __init__(self, p: KernelProfile, w: OpWork, c: Coefficients, r: _Rates) -> None:
        rec = w.record
        self.tc = 0.0
        if rec.tensor is not None:
            t = rec.tensor
            self.tc = t.flops / _tensor_rate(p, c, t.dtype, t.family, t.shape[1])
        self.cuda = rec.cuda_ops / r.cuda_sm
        self.mufu = rec.mufu_ops * MUFU_WEIGHT / r.cuda_sm
        # bank conflicts: an n-way conflicted access moves its bytes in n wavefronts
        self.smem = (rec.smem_read + rec.smem_write) * rec.smem_conflict / r.smem_sm
        self.l2 = rec.l2_bytes / r.l2_sm
        self.sync = _sync_seconds(rec, c)
        self.issue = rec.issue * c.issue_ns * 1e-9


def _rates(gpu: GpuSpec, c: Coefficients) -> _Rates:
    return _Rates(
        clock=gpu.clock_hz, sms=gpu.sms,
        hbm=gpu.hbm_bandwidth * c.hbm_efficiency,
        l2_sm=gpu.l2_bandwidth * c.l2_efficiency / gpu.sms,
        smem_sm=c.smem_bytes_per_clk_sm * gpu.clock_hz,
        cuda_sm=gpu.fp32_peak / 2 / gpu.sms * c.cuda_efficiency,
        l_dram=c.dram_latency_ns * 1e-9, l_l2=c.l2_latency_ns * 1e-9)


class _Ledger:
    """Seconds credited to each op by category, to each category, and to each term."""

    def __init__(self, n: int) -> None:
        self.contrib: list[dict[str, float]] = [{} for _ in range(n)]
        self.categories = dict.fromkeys(CATEGORIES, 0.0)
        self.terms: dict[str, float] = {}
        self.memory = dict.fromkeys(MEMORIES, 0.0)
        """Seconds credited to memory, by the memory that bound them."""

    def credit(self, i: int, cat: str, secs: float) -> None:
        if secs > 0:
            self.contrib[i][cat] = self.contrib[i].get(cat, 0.0) + secs
            self.categories[cat] += secs

    def spread(self, idx: list[int], weights: list[float], cat: str, secs: float) -> None:
        """Credit `secs` to the ops `idx` in proportion to `weights` (evenly when they are
        all zero; to the category alone when there is no op)."""
        tot = sum(weights)
        if secs <= 0:
            return
        if tot <= 0:
            if idx:
                for i in idx:
                    self.credit(i, cat, secs / len(idx))
            else:
                self.categories[cat] += secs
            return
        for i, wgt in zip(idx, weights, strict=True):
            self.credit(i, cat, secs * wgt / tot)


class _Pricing:
    """One profile under one set of coefficients: what every stage of a wave needs."""

    def __init__(self, p: KernelProfile, c: Coefficients) -> None:
        self.p, self.c = p, c
        self.r = r = _rates(p.gpu, c)
        self.times = [_OpTimes(p, w, c, r) for w in p.ops]
        self.book = _Ledger(len(p.ops))
        # DRAM bytes per op and wave: tensors small enough to stay in L2 are read once in all
        self.dram_reads = _dram_reads(p, c)
        # a round trip is an L2 hit for tensors that stay resident, a DRAM access otherwise
        resident = {t for t, (touched, _) in p.tensors.items()
                    if touched <= c.l2_resident_fraction * p.gpu.l2_bytes}
        self.op_latency = [max((r.l_l2 if a.tensor in resident else r.l_dram
                                for a in w.record.reads), default=r.l_dram) for w in p.ops]
        self.steady = [i for i, w in enumerate(p.ops) if w.phase == STEADY]
        self.serial_ops = [i for i, w in enumerate(p.ops) if w.phase != STEADY]
        self.roles = sorted({p.ops[i].role for i in self.steady})
        self.pipelined_loops = _pipelined_loops(p)
        self.ahead = _runs_ahead(p)
        self.waited_groups = _waited_groups(p)

    def wave(self, ws: WaveShape, dram: list[float]) -> float:
        """Seconds of the `ws.count` waves of one shape: the steady state, its fill, the
        loads waited for and the serial ops, each credited as it is priced."""
        p = self.p
        writes = [w.record.global_write_bytes * w.execs
                  * (min(ws.blocks, p.blocks) if w.per_block else ws.blocks) for w in p.ops]
        terms = self.throughput(ws, dram, writes)
        chains = self.role_chains()
        for key, (secs, idx, comp, syn) in chains.items():
            terms[key] = (secs, idx, [a + s for a, s in zip(comp, syn, strict=True)],
                          "compute")
        terms["latency"] = self.latency_bound(max((t[0] for t in terms.values()),
                                                  default=0.0))
        wave = self.overlap(ws, terms, chains)
        fill_all = self.fill(ws)
        waited = self.waited(ws)
        serial, serial_once = self.serial(ws, dram, writes)
        totals = self.book.terms
        totals["fill"] = totals.get("fill", 0.0) + fill_all
        totals["waited"] = totals.get("waited", 0.0) + waited * ws.count
        totals["serial"] = totals.get("serial", 0.0) + serial * ws.count + serial_once
        return (wave + waited + serial) * ws.count + fill_all + serial_once

    # -- steady state ----------------------------------------------------------------------
    def throughput(self, ws: WaveShape, dram: list[float], writes: list[float]
                   ) -> dict[str, Term]:
        """Compute and memory bounds: each unit's time for the steady work of the blocks on
        the busiest SM, and DRAM time for the wave's distinct bytes."""
        times, ops, steady, b = self.times, self.p.ops, self.steady, ws.per_sm
        term: dict[str, Term] = {}
        tc_w = [times[i].tc * ops[i].execs for i in steady]
        term["tensor"] = (b * sum(tc_w), steady, tc_w, "compute")
        cu_w = [max(times[i].cuda, times[i].mufu) * ops[i].execs for i in steady]
        term["cuda"] = (b * _cuda_seconds(times, ops, steady), steady, cu_w, "compute")
        sm_w = [times[i].smem * ops[i].execs for i in steady]
        term["smem"] = (b * sum(sm_w), steady, sm_w, "memory")
        l2_w = [times[i].l2 * ops[i].execs for i in steady]
        term["l2"] = (b * sum(l2_w), steady, l2_w, "memory")
        dr_w = [dram[i] + writes[i] for i in steady]
        term["dram"] = (sum(dr_w) / self.r.hbm, steady, dr_w, "memory")
        return term

    def latency_bound(self, busy: float) -> Term:
        """Little's law over a pipeline's buffers: each of a loop's `depth + 1` stages
        cycles through a round trip (the copy in flight, `L`) and the iteration that
        consumes it (`c`, the stage is held until it is released), so `depth + 1`
        iterations take at least `L + c`: an iteration takes at least
        `(L + c) / (depth + 1)`.  `depth` (`stages - 1`) is the copies in flight while one
        stage is consumed; pricing the round trip alone over `depth` (`L / depth`) counts
        the consumed stage as idle, which overstates the bound whenever it binds (it
        binds exactly when `L > depth x c`, and then `(L + c) / (depth + 1) < L / depth`)
        and agrees with it where it does not.  `busy` is the wave's steady state without
        this bound (the largest compute, memory and role-chain term): the time its
        iterations take when no copy is late, shared out over the pipelined loops by
        their iterations."""
        lat_idx: list[int] = []
        lat_w: list[float] = []
        execs = {loop: self.p.loop_execs[loop] for loop in self.pipelined_loops}
        total = sum(execs.values())
        for loop, (idx, depth, _bytes) in self.pipelined_loops.items():
            trip = max(self.op_latency[i] for i in idx)
            consume = busy * execs[loop] / total if total else 0.0
            secs = (execs[loop] * trip + consume) / (max(1, depth) + 1)
            for i in idx:
                lat_idx.append(i)
                lat_w.append(secs / len(idx))
        return (sum(lat_w), lat_idx, lat_w, "latency")

    def role_chains(self) -> dict[str, Chain]:
        """Each role's own bound; roles overlap each other.  Within a role (tensor time T,
        CUDA-core time C, waits and issue S, per block), C is split by where its ops run
        relative to the role's asynchronous MMAs (`overlapped_cuda`): `Co` runs while one
        of the role's wgmma groups is in flight (issued, not yet retired by a
        `wgmma_wait(n)`), so it can share time with the tensor pipe; `Cx` runs with
        nothing in flight (after a `wgmma_wait(0)`, before the next issue) and cannot.
        With `pipes(T, Co) = max(T, Co) + contention x min(T, Co)`, the contention share
        being what issue slots and register-file ports leave unhidden:

        - an MMA that is synchronous to the warps that issue it (`mma.sync`) is a drain
          with `Co = 0`: `T + C + S`;
        - a role that drains the tensor pipe every iteration (`wgmma_wait(0)` in its loop):
          `pipes(T, Co) + Cx + S`; the drain keeps the next iteration's MMAs from starting
          before the wait, so the waits add.  `Co = 0` (wait right after the issue) is
          `T + C + S`; the CUDA work between an issue and its `wgmma_wait(0)` overlaps;
        - one that keeps an MMA group in flight across iterations overlaps its waits with
          the tensor pipe as well: `max(pipes(T, Co), Co + S) + Cx`;
        - the warpgroups of one role wait on the same stages and share the tensor cores
          fairly, so they run in lockstep: the formulas above hold for the role as a
          whole.  Warpgroups staggered by named barriers (a ping-pong schedule) overlap
          one's MMA with another's math: the longer of one warpgroup's sequence,
          `(max(T, Co) + Cx) / g + S`, and the pipes they keep busy,
          `max(T, C) + contention x min(T, C)`.
        - consumer roles of one pipeline are released by the same stage, so they are priced
          as one role of all their warpgroups (`lockstep_groups`): in lockstep, or as a
          ping-pong when every one of them meets the others at named barriers."""
        times, ops, kappa = self.times, self.p.ops, self.c.pipe_contention
        chains: dict[str, Chain] = {}
        for group in self.lockstep_groups():
            idx = [i for i in self.steady if ops[i].role in group]
            tc = sum(times[i].tc * ops[i].execs for i in idx)
            cu = _cuda_seconds(times, ops, idx)
            comp = [(times[i].tc + max(times[i].cuda, times[i].mufu)) * ops[i].execs
                    for i in idx]
            syn = [(times[i].sync + times[i].issue) * ops[i].execs for i in idx]
            # the roles of a group wait side by side: one role's waits are the group's
            waits = sum(syn) / len(group)
            kinds = {kind for i in idx for kind, _ in ops[i].record.sync}
            # mma.sync is synchronous to the warps that issue it: they wait in between
            families = {t.family for i in idx if (t := ops[i].record.tensor) is not None}
            asynchronous = bool(families & ASYNC_MMA)
            drains = "wgmma_wait0" in kinds or not asynchronous
            if families <= {"wgmma"} and asynchronous:
                over = self.overlapped_cuda(group)
                co = _cuda_seconds(times, ops, [i for i in idx if over[i]])
                cx = _cuda_seconds(times, ops, [i for i in idx if not over[i]])
            else:  # no wgmma group to follow: a drain exposes all, no drain hides all
                co, cx = (0.0, cu) if drains else (cu, 0.0)
            pipes = max(tc, cu) + kappa * min(tc, cu)
            g = sum(self.warpgroups(role) for role in group)
            if g > 1 and all("named_barrier" in self.sync_kinds(r) for r in group):
                one = (max(tc, co) + cx) / g + waits
                secs = max(one, pipes)
            elif drains:
                secs = max(tc, co) + kappa * min(tc, co) + cx + waits
            else:
                secs = max(max(tc, co) + kappa * min(tc, co), co + waits) + cx
            chains["role:" + "+".join(group)] = (secs, idx, comp, syn)
        return chains

    def overlapped_cuda(self, group: tuple[str, ...]) -> dict[int, bool]:
        """Steady op -> whether it runs while its role has a wgmma group in flight.

        Each role's steady ops are walked in program order, twice: the second pass starts
        with what the end of the first left in flight, as the next iteration of the loop
        does.  A `wgmma` puts a group in flight; `wgmma_wait(n)` retires all but the `n`
        newest, so only `n = 0` leaves none.  Whether some group is in flight is all
        that matters here, so the exact number of groups is not followed."""
        ops = self.p.ops
        out: dict[int, bool] = {}
        for role in group:
            idx = [i for i in self.steady if ops[i].role == role]
            busy = False
            for _ in range(2):
                for i in idx:
                    w = ops[i]
                    t = w.record.tensor
                    if t is not None and t.family == "wgmma":
                        busy = True
                    elif w.op.prim.key.endswith("wgmma_wait") and \
                            any(kind == "wgmma_wait0" for kind, _ in w.record.sync):
                        busy = False
                    out[i] = busy
        return out

    def sync_kinds(self, role: str) -> set[str]:
        """The kinds of synchronisation a role's steady ops perform."""
        ops = self.p.ops
        return {kind for i in self.steady if ops[i].role == role
                for kind, _ in ops[i].record.sync}

    def lockstep_groups(self) -> list[tuple[str, ...]]:
        """The roles priced together: each role alone, except the consumer roles of one
        pipeline (every stage releases all of them at once), which share the SM's tensor and
        CUDA cores as the warpgroups of one role do: in lockstep, or staggered when all of
        them synchronise on named barriers (a ping-pong)."""
        shared: dict[str, set[str]] = {}
        for v in self.p.kernel.values.values():
            t = v.type
            if isinstance(t, PipelineType) and len(t.consumers) > 1:
                cons = [r for r in t.consumers if r in self.roles]
                for r in cons:
                    shared.setdefault(r, set()).update(cons)
        groups: list[tuple[str, ...]] = []
        seen: set[str] = set()
        for role in self.roles:
            if role in seen:
                continue
            members = sorted(shared.get(role, {role}))
            seen.update(members)
            groups.append(tuple(members))
        return groups

    def warpgroups(self, role: str) -> int:
        """Warpgroups (4 warps, one per SM sub-partition) that share a role's work."""
        k = self.p.kernel
        warps = k.roles[role].warps if role in k.roles else k.warps
        return max(1, warps // 4)

    def overlap(self, ws: WaveShape, term: dict[str, Term], chains: dict[str, Chain]) -> float:
        """The steady state is its largest bound, the others hide under it; it is credited
        to the ops of that bound (a role's chain by its compute and its synchronization)."""
        key = max(term, key=lambda k: term[k][0])
        secs, idx, wts, cat = term[key]
        if key in chains:
            _, idx, comp, syn = chains[key]
            waits = min(sum(syn), secs)
            self.book.spread(idx, comp, "compute", (secs - waits) * ws.count)
            self.book.spread(idx, syn, "sync", waits * ws.count)
        else:
            self.book.spread(idx, wts, cat, secs * ws.count)
            if key in MEMORIES:
                self.book.memory[key] += secs * ws.count
        for k, (s, *_rest) in term.items():
            self.book.terms[k] = self.book.terms.get(k, 0.0) + s * ws.count
        return secs

    # -- what does not overlap -------------------------------------------------------------
    def fill(self, ws: WaveShape) -> float:
        """Start-up: a block waits one round trip for its first stage (and for tiles it
        loads once), issued together.  In the first wave every block streams its first
        stage at once; later blocks start staggered and fetch it at their SM's L2 bandwidth
        (later blocks of a persistent kernel are later tiles: a producer role that runs
        ahead has their first stages in flight already)."""
        p, r, op_latency, ahead = self.p, self.r, self.op_latency, self.ahead
        first = ws is p.waves[0]
        starts: list[tuple[float, float, list[int]]] = []  # (first wave, later ones, ops)
        for idx, _depth, iter_bytes in self.pipelined_loops.values():
            lat = max(op_latency[i] for i in idx)
            later = 0.0 if all(p.ops[i].role in ahead for i in idx) else \
                lat + iter_bytes / r.l2_sm
            starts.append((lat + iter_bytes / (r.hbm / ws.blocks), later, idx))
        once = [i for i, w in enumerate(p.ops) if not w.per_block and any(
            a.latency == ONCE or (a.latency == SERIAL and w.phase != STEADY)
            for a in w.record.reads)]
        if once:
            once_latency = max(op_latency[i] for i in once)
            later = 0.0 if all(p.ops[i].role in ahead for i in once) else once_latency
            starts.append((once_latency, later, once))
        once_block = [i for i, w in enumerate(p.ops) if w.per_block and any(
            a.latency in (ONCE, SERIAL) for a in w.record.reads)]
        if once_block:  # loaded once per block of a persistent kernel
            starts.append((max(op_latency[i] for i in once_block), 0.0, once_block))
        fill_first = max((f for f, _, _ in starts), default=0.0)
        fill_later = max((f for _, f, _ in starts), default=0.0)
        fill_all = fill_first + fill_later * (ws.count - 1) if first else \
            fill_later * ws.count
        if starts:
            owner = max(starts, key=lambda fs: fs[0] if first else fs[1])[2]
            self.book.spread(owner, [1.0] * len(owner), "latency", fill_all)
        return fill_all

    def waited(self, ws: WaveShape) -> float:
        """Loads that every iteration waits for (copies completing together wait once)."""
        waited = 0.0
        for idx, trips in self.waited_groups:
            secs = trips * max(self.op_latency[i] for i in idx)
            for i in idx:
                self.book.credit(i, "latency", secs * ws.count / len(idx))
            waited += secs
        return waited

    def serial(self, ws: WaveShape, dram: list[float], writes: list[float]
               ) -> tuple[float, float]:
        """Prologue and epilogue ops run on their own: (seconds per wave, seconds once).  A
        persistent kernel's work outside its tile loop runs once per block, in the first
        wave."""
        p, r = self.p, self.r
        first = ws is p.waves[0]
        serial = serial_once = 0.0
        for i in self.serial_ops:
            t, w = self.times[i], p.ops[i]
            if w.per_block and not first:
                continue
            count = 1 if w.per_block else ws.count
            # the memories overlap each other: the op takes the one that binds
            by = {"smem": ws.per_sm * t.smem, "l2": ws.per_sm * t.l2,
                  "dram": (dram[i] + writes[i]) / r.hbm}
            binds = max(by, key=lambda k: by[k])
            mem = by[binds] * w.execs
            comp = ws.per_sm * (t.tc + max(t.cuda, t.mufu)) * w.execs
            syn = (t.sync + t.issue) * w.execs
            self.book.credit(i, "memory", mem * count)
            self.book.memory[binds] += mem * count
            self.book.credit(i, "compute", comp * count)
            self.book.credit(i, "sync", syn * count)
            if w.per_block:
                serial_once += mem + comp + syn
            else:
                serial += mem + comp + syn
        return serial, serial_once

    # -- the result ------------------------------------------------------------------------
    def prediction(self, calibration: str, total: float, launch: float) -> Prediction:
        """The priced kernel: totals, the work it does, its roofline and its bottleneck."""
        p, gpu, book = self.p, self.p.gpu, self.book
        n = len(p.ops)
        reads_total = sum(w.record.global_read_bytes * w.execs * p.scale(w) for w in p.ops)
        dram_total = sum(sum(d[i] for i in range(n)) * ws.count
                         for d, ws in zip(self.dram_reads, p.waves, strict=True))
        tensor_flops = sum((w.record.tensor.flops if w.record.tensor else 0.0) * w.execs
                           * p.scale(w) for w in p.ops)
        cuda_ops = sum(w.record.cuda_ops * w.execs * p.scale(w) for w in p.ops)
        mufu_ops = sum(w.record.mufu_ops * w.execs * p.scale(w) for w in p.ops)
        write_total = sum(w.record.global_write_bytes * w.execs * p.scale(w) for w in p.ops)
        compulsory = sum(t for t, _ in p.tensors.values()) + write_total
        smem_total = sum((w.record.smem_read + w.record.smem_write) * w.execs * p.scale(w)
                         for w in p.ops)
        l2_total = sum(w.record.l2_bytes * w.execs * p.scale(w) for w in p.ops)
        floors = _floors(p, max(cuda_ops, MUFU_WEIGHT * mufu_ops), compulsory, l2_total,
                         smem_total)
        # the shape's roofline takes the resources any kernel of the shape needs (the
        # agents clamp candidates' times at it); L2 and shared-memory traffic depend on
        # this kernel's tiling and only enter its own floor
        shape_floors = {k: floors[k] for k in ("tensor", "cuda", "dram")}
        roofline_bound = max(shape_floors, key=lambda k: shape_floors[k])
        roofline = shape_floors[roofline_bound]
        bottleneck = max(CATEGORIES, key=lambda k: book.categories[k])
        detail = bottleneck_detail(p, bottleneck, book.contrib, book.memory)
        lines = line_shares(p, book.contrib, launch, total)
        work = {"tensor_flops": tensor_flops, "cuda_ops": cuda_ops,
                "dram_bytes": dram_total + write_total,
                "l2_bytes": reads_total + write_total,
                "l2_sm_bytes": l2_total,
                "smem_bytes": smem_total,
                "compulsory_bytes": compulsory}
        # waves of blocks; of tiles for a persistent kernel (its blocks all run at once)
        per_wave = gpu.sms * p.blocks_per_sm
        if p.tile_loops is not None:
            per_wave = min(per_wave, p.blocks)
        waves = p.units / per_wave if per_wave else math.inf
        return Prediction(kernel=p.kernel.name, target=p.kernel.arch, arch=p.arch.name,
                          gpu=gpu.name, dims=dict(p.dims), calibration=calibration,
                          seconds=total, tensor_flops=tensor_flops, cuda_ops=cuda_ops,
                          roofline_seconds=roofline, roofline_bound=roofline_bound,
                          floors=floors, bottleneck=bottleneck,
                          bottleneck_detail=detail, categories=book.categories,
                          terms=book.terms, work=work, grid=p.grid, blocks=p.blocks,
                          blocks_per_sm=p.blocks_per_sm, waves=waves, resources=p.resources,
                          lines=lines, warnings=list(p.warnings) + list(p.resources.warnings))


def estimate(p: KernelProfile, coefficients: Coefficients | None = None,
             calibration: Calibration | None = None) -> Prediction:
    """Price a profile with `coefficients` (default: the GPU's defaults) and, on top of
    them, the ones a `calibration` names; the calibration names itself in the prediction."""
    c = coefficients if coefficients is not None else default_coefficients(p.gpu)
    name = UNCALIBRATED
    if calibration is not None:
        c = calibration.apply(c)
        name = calibration.name
    pricing = _Pricing(p, c)
    total = 0.0
    for ws, dram in zip(p.waves, pricing.dram_reads, strict=True):
        total += pricing.wave(ws, dram)
    launch = c.launch_us * 1e-6
    pricing.book.categories["launch"] += launch
    pricing.book.terms["launch"] = launch
    total += launch
    return pricing.prediction(name, total, launch)


def _dram_reads(p: KernelProfile, c: Coefficients) -> list[list[float]]:
    """DRAM read bytes per op for each wave shape.

    A tensor whose touched bytes fit in the resident share of L2 is read from DRAM once
    over the whole kernel (spread over the waves by their blocks); a larger one pays the
    wave model: every wave fetches the distinct tiles its blocks read, never less than its
    share of the compulsory bytes.
    """
    resident = c.l2_resident_fraction * p.gpu.l2_bytes
    out = []
    for ws in p.waves:
        row = [0.0] * len(p.ops)
        share = ws.blocks / p.units if p.units else 0.0
        for touched, idx in p.tensors.values():
            model = sum(ws.read_model[i] for i in idx)
            want = touched * share if touched <= resident else max(model, touched * share)
            for i in idx:
                row[i] += want * (ws.read_model[i] / model if model else 1.0 / len(idx))
        out.append(row)
    return out


def _pipelined_loops(p: KernelProfile) -> dict[int, tuple[list[int], int, float]]:
    """Loop -> (its pipelined read ops, iterations in flight, bytes per iteration).

    The loop is the one a stage is filled in: copies of one pipeline stage issued by an
    inner loop (a tile loaded as several swizzle-wide slabs, `for h in range(D // DK)`)
    complete on the stage's one barrier phase, so they are one round trip per stage, not
    one per slab; the stage loop is where the producer commits (`_stage_loops`).  A copy
    with no commit to go by keeps its innermost loop."""
    stage_loops = _stage_loops(p)
    loops: dict[int, tuple[list[int], int, float]] = {}
    for i, w in enumerate(p.ops):
        if w.loop is None or w.phase != STEADY or not w.execs:
            continue
        for a in w.record.reads:
            if a.latency != PIPELINED:
                continue
            loop = stage_loops.get((w.role, a.group), w.loop)
            if p.loop_execs[loop] > p.loop_execs[w.loop]:
                loop = w.loop  # a commit outside this copy's loop nest
            idx, depth, nbytes = loops.get(loop, ([], 1 << 30, 0.0))
            if i not in idx:
                idx.append(i)
            per_iter = w.execs / p.loop_execs[loop] if p.loop_execs[loop] else 0.0
            loops[loop] = (idx, min(depth, max(1, a.depth)), nbytes + a.bytes * per_iter)
    return loops


def _stage_loops(p: KernelProfile) -> dict[tuple[str, str], int]:
    """(role, copy group) -> the loop in which that role commits a stage of the pipeline
    (the group a TMA copy names is its barrier key joined, `tma_load`'s cost facet)."""
    out: dict[tuple[str, str], int] = {}
    for w in p.ops:
        spec = w.op.prim.effects
        if w.loop is None or w.phase != STEADY or spec.pipe_action is not PipeAction.COMMIT:
            continue
        key = barrier_key(w.op.args.get(spec.arrives or "self"))
        if key is not None:
            out.setdefault((w.role, "/".join(key)), w.loop)
    return out


def _waited_groups(p: KernelProfile) -> list[tuple[list[int], float]]:
    """Serial loads of the steady loops, grouped by what one wait covers: the copies of
    one iteration that complete on the same barrier share a round trip; any other
    serial load is waited for on its own.  Each group comes with its executions."""
    groups: dict[tuple[object, ...], list[int]] = {}
    trips: dict[tuple[object, ...], float] = {}
    for i, w in enumerate(p.ops):
        if w.phase != STEADY:
            continue
        for a in w.record.reads:
            if a.latency != SERIAL:
                continue
            key: tuple[object, ...] = (w.loop, w.role, a.group) if a.group else (i,)
            idx = groups.setdefault(key, [])
            if i not in idx:
                idx.append(i)
            t = p.loop_execs[w.loop] if w.loop is not None else 1.0
            trips[key] = max(trips.get(key, 0.0), t)
    return [(idx, trips[k]) for k, idx in groups.items()]


def _runs_ahead(p: KernelProfile) -> set[str]:
    """Roles of a persistent kernel that start the next tile's copies while the others
    finish the current tile: roles whose tile-loop work is all inside inner loops (no
    per-tile prologue or epilogue of their own), other than the kernel's only role."""
    if p.tile_loops is None:
        return set()
    out = set()
    for role in {w.role for w in p.ops if not w.per_block}:
        if role == ALL_WARPS:
            continue
        tile_ops = [w for w in p.ops if w.role == role and not w.per_block]
        if all(w.phase == STEADY or w.record == FREE for w in tile_ops):
            out.add(role)
    return out


#: Shared memory serves one 128-byte wavefront per clock per SM (32 banks x 4 bytes).
SMEM_BYTES_PER_CLK_SM = 128.0


def _floors(p: KernelProfile, cuda_ops: float, compulsory: float, l2_bytes: float,
            smem_bytes: float) -> dict[str, float]:
    """The least time each resource needs for the kernel's work, at the datasheet peaks
    (no efficiency): the pipes and memories overlap, so the floor is their largest, not
    their sum.  Tensor work is priced at each dtype's own peak; `cuda_ops` is the busier
    of the FP32 issue slots and the multi-function unit, in FP32-lane operations."""
    gpu = p.gpu
    bf16 = gpu.tensor_peak.get("bf16", 1e12)
    tensor = sum(w.record.tensor.flops * w.execs * p.scale(w)
                 / gpu.tensor_peak.get(w.record.tensor.dtype, bf16)
                 for w in p.ops if w.record.tensor is not None)
    return {"tensor": tensor,
            "cuda": cuda_ops / (gpu.fp32_peak / 2),
            "dram": compulsory / gpu.hbm_bandwidth,
            "l2": l2_bytes / gpu.l2_bandwidth,
            "smem": smem_bytes / (SMEM_BYTES_PER_CLK_SM * gpu.clock_hz * gpu.sms)}
