"""The same lowered kernels on the GPU and under CPU emulation: do they write the same bytes?

`cake run --emulate` is only worth trusting if the CPU runtime behaves like the hardware on
the code CAKE emits.  This script runs every example kernel and every variant the bundled
tactics offer on them, each on two of its task's simulator shapes (one ragged where the
kernel's size contract allows), on the GPU and under emulation in both completion orders
(lazy and eager), with the same inputs, and compares the outputs:

- **exact** inputs (small integers, so every product and partial sum is exact in f32 and
  the summation order cannot matter): the GPU's and the emulation's outputs must be equal
  byte for byte;
- **random** inputs (the task's own generator): both are judged against the task's
  reference, and the largest difference between GPU and emulation is reported (summation
  order inside an MMA is the hardware's, so bit equality is not expected).

Every (kernel, shape) runs in its own subprocess with a timeout, so a kernel that faults or
hangs on the GPU is reported as such and cannot poison the next one's CUDA context.  Where
no GPU is present (or with `--no-gpu`) only the emulation side runs, against the
reference: that checks the script itself.

    python bench/gpu_vs_emulation.py [--jobs 8] [--timeout 240] [--only NAME] [--no-tactics]

Prints a table and writes bench/results/gpu_vs_emulation.json (or `--out`).  Exit status:
0 every comparison agrees; 1 a difference, a wrong output, a crash or a timeout; 2 setup.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
#: Seeds of the input sets; the emulator's schedule seed follows the input seed.
SEEDS = (0, 1)
ORDERS = ("lazy", "eager")


# --- the work list (parent process) ---------------------------------------------------------

def work_items(tactics: bool, only: str | None, tmp: Path) -> list[dict[str, Any]]:
    """One item per (kernel source, shape): the examples, then every offered tactic variant,
    written out as files so each item's subprocess reads its own source."""
    from cake_core.check import check_text
    from cake_core.diagnostics.model import apply_edits
    from cake_core.tasks import load_task, task_names

    sources: list[tuple[str, Path, str, str]] = []  # (label, path, kernel, task)
    for tname in task_names():
        task = load_task(tname)
        for entry in task.kernels:
            path = Path(entry.path)
            sources.append((path.stem, path, entry.kernel, tname))
    if tactics:
        from cake_tactics import plugin

        for label, path, kname, tname in list(sources):
            text = path.read_text(encoding="utf-8")
            res = check_text(text, path.name)
            if res.program is None:
                continue
            kernel = next(k for k in res.program.kernels if k.name == kname)
            for tactic in plugin.tactics:
                if tactic.applies(kernel, res.source) is None:
                    continue
                for i, params in enumerate(tactic.variants(kernel, res.source)):
                    out = tactic.apply(kernel, res.source, params)
                    if out is None:
                        continue
                    vlabel = f"{label}+{tactic.name}#{i}"
                    vpath = tmp / f"{vlabel.replace('+', '_').replace('#', '_')}.cake"
                    vpath.write_text(apply_edits(text, out.edits), encoding="utf-8")
                    sources.append((vlabel, vpath, kname, tname))
    items = []
    for label, path, kname, tname in sources:
        if only and only not in label:
            continue
        task = load_task(tname)
        shapes = list(task.shapes_for(task.entry(kname, path), sim=True))
        for shape in pick_shapes(shapes):
            items.append({"label": label, "path": str(path), "kernel": kname, "task": tname,
                          "dims": dict(shape.dims)})
    return items


def pick_shapes(shapes: list[Any]) -> list[Any]:
    """Two shapes: the first, and a ragged one (a dim not a multiple of 8) if there is one."""
    if len(shapes) <= 2:
        return shapes
    ragged = [s for s in shapes[1:] if any(int(v) % 8 for v in s.dims.values())]
    return [shapes[0], (ragged or shapes[1:])[0]]


def run_items(items: list[dict[str, Any]], jobs: int, timeout: float, gpu: bool,
              cache: Path) -> list[dict[str, Any]]:
    def one(item: dict[str, Any]) -> dict[str, Any]:
        cmd = [sys.executable, __file__, "--item", json.dumps(item), "--cache", str(cache)]
        if not gpu:
            cmd.append("--no-gpu")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            return {**item, "status": "timeout", "seconds": timeout}
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout)[-1500:]
            return {**item, "status": "crashed", "rc": proc.returncode, "log": tail,
                    "seconds": round(time.perf_counter() - t0, 2)}
        out: dict[str, Any] = json.loads(lines[-1])
        out["seconds"] = round(time.perf_counter() - t0, 2)
        return out

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, items))


# --- one item (subprocess) ------------------------------------------------------------------

class SmallIntegers:
    """A random generator for a task's `inputs` whose normals are small integers.

    The task builds its inputs as usual (derived inputs, such as k-means' centroid norms,
    stay consistent with the others), but every value is an integer or a half: products
    and partial sums stay exact in f32 whatever the order, so outputs must agree bit for
    bit wherever the code is the same."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def standard_normal(self, size: Any = None) -> np.ndarray:
        return self._rng.integers(-3, 4, size=size).astype(np.float64)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)


def launch_once(device: Any, kernel: Any, dims: Mapping[str, int], host: Mapping[str, Any],
                rename: Mapping[str, str], outputs: list[str]) -> dict[str, np.ndarray]:
    """Upload, poison the outputs, launch, wait; the outputs' raw bytes by task name."""
    from cake_core.run.tensors import to_storage
    from cake_core.sim.dtypes import POISON_BYTE

    specs = {s.name: s for s in kernel.specs}
    stream = device.new_stream()
    buffers: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for name, value in host.items():
        kname = rename.get(name, name)
        if kname not in specs:
            scalars[kname] = value
            continue
        storage = to_storage(np.asarray(value), specs[kname].dtype)
        buffers[kname] = device.alloc(storage.nbytes)
        device.upload(buffers[kname], storage)
    for tname in outputs:
        kname = rename.get(tname, tname)
        buffers[kname] = device.alloc(specs[kname].nbytes(dims))
        device.fill(buffers[kname], POISON_BYTE, specs[kname].nbytes(dims), stream)
    kernel.launch(device, buffers, dims, scalars, stream)
    device.synchronize()
    got = {}
    for tname in outputs:
        kname = rename.get(tname, tname)
        got[tname] = device.download(buffers[kname], specs[kname].nbytes(dims)).copy()
    for buf in buffers.values():
        device.free(buf)
    return got


def compare(a: np.ndarray, b: np.ndarray, dtype: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    from cake_core.run.tensors import from_storage

    fa = from_storage(a, dtype, shape).astype(np.float64)
    fb = from_storage(b, dtype, shape).astype(np.float64)
    width = dtype.bytes
    differ = np.any(a.reshape(-1, width) != b.reshape(-1, width), axis=1)
    both = np.isfinite(fa) & np.isfinite(fb)
    diff = float(np.max(np.abs(fa - fb)[both.reshape(fa.shape)])) if both.any() else 0.0
    return {"equal": not bool(differ.any()), "differing": int(differ.sum()),
            "max_abs_diff": diff}


def run_item(item: dict[str, Any], cache: Path, gpu: bool) -> dict[str, Any]:
    from cake_core.emulate.build import build_emulated
    from cake_core.run.device import open_device, probe_gpu
    from cake_core.run.emulated import EmulatedKernel
    from cake_core.run.host_device import HostDevice
    from cake_core.run.kernels import CudaKernel
    from cake_core.run.runner import _lower, load_kernel
    from cake_core.tasks import load_task

    task = load_task(item["task"])
    path = Path(item["path"])
    dims = {k: int(v) for k, v in item["dims"].items()}
    src, kernel, _ = load_kernel(path, item["kernel"], task)
    entry = task.entry(kernel.name, path)
    rename = dict(entry.params) if entry is not None else {}
    cu, meta = _lower(src, kernel)
    out: dict[str, Any] = {**item, "status": "ok", "runs": []}

    gpu_kernel = device = None
    if gpu:
        from cake_core.run.build import build_library, nvcc_target

        probe = probe_gpu()
        device = open_device("auto")
        lib = build_library(cu, nvcc_target(kernel.arch, probe.compute_capability),
                            name=kernel.name, cache=cache)
        gpu_kernel = CudaKernel(lib.path, meta)
        gpu_kernel.prepare()
        out["gpu"] = probe.name
    emu_lib = build_emulated(cu, name=kernel.name, cache=cache)
    host_dev = HostDevice()
    for seed in SEEDS:
        for kind in ("exact", "random"):
            rng = np.random.default_rng(seed)
            gen: Any = SmallIntegers(rng) if kind == "exact" else rng
            host = task.inputs(dims, gen)
            want = task.reference(host, dims)
            run: dict[str, Any] = {"seed": seed, "inputs": kind, "outputs": {}}
            gpu_out = launch_once(device, gpu_kernel, dims, host, rename, list(task.outputs)) \
                if gpu_kernel is not None else None
            emu_outs = {}
            for order in ORDERS:
                ek = EmulatedKernel(emu_lib.path, meta, seed=seed, order=order)
                emu_outs[order] = launch_once(host_dev, ek, dims, host, rename,
                                              list(task.outputs))
            for tname in task.outputs:
                kname = rename.get(tname, tname)
                spec = next(s for s in (gpu_kernel or ek).specs if s.name == kname)
                shape = spec.dims_shape(dims)
                o: dict[str, Any] = {}
                from cake_core.run.tensors import from_storage

                sides = dict(emu_outs)
                if gpu_out is not None:
                    sides["gpu"] = gpu_out
                for side, raw in sides.items():
                    got = from_storage(raw[tname], spec.dtype, shape)
                    o[f"{side}_correct"] = bool(task.judge(tname, got, want[tname], host, dims,
                                                           spec.dtype.value).passed)
                o["lazy_vs_eager"] = compare(emu_outs["lazy"][tname], emu_outs["eager"][tname],
                                             spec.dtype, shape)
                if gpu_out is not None:
                    o["gpu_vs_emulation"] = compare(gpu_out[tname], emu_outs["lazy"][tname],
                                                    spec.dtype, shape)
                run["outputs"][tname] = o
            out["runs"].append(run)
    out["status"] = verdict(out, gpu_kernel is not None)
    return out


def verdict(out: dict[str, Any], gpu: bool) -> str:
    """`ok`, or what went wrong first: a wrong output beats a mere difference."""
    for run in out["runs"]:
        for o in run["outputs"].values():
            for side in ("gpu", "lazy", "eager"):
                if o.get(f"{side}_correct") is False:
                    return f"{side} wrong"
            if run["inputs"] == "exact":
                if not o["lazy_vs_eager"]["equal"]:
                    return "lazy != eager"
                if gpu and not o["gpu_vs_emulation"]["equal"]:
                    return "gpu != emulation"
    return "ok"


# --- report ---------------------------------------------------------------------------------

def summary_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in results:
        shape = ",".join(f"{k}={v}" for k, v in r["dims"].items())
        exact = [o for run in r.get("runs", []) if run["inputs"] == "exact"
                 for o in run["outputs"].values() if "gpu_vs_emulation" in o]
        rand = [o for run in r.get("runs", []) if run["inputs"] == "random"
                for o in run["outputs"].values() if "gpu_vs_emulation" in o]
        eq = f"{sum(o['gpu_vs_emulation']['equal'] for o in exact)}/{len(exact)}" \
            if exact else "-"
        diff = f"{max(o['gpu_vs_emulation']['max_abs_diff'] for o in rand):.3g}" \
            if rand else "-"
        rows.append([r["label"], shape, r["status"], eq, diff, f"{r.get('seconds', 0):.1f}"])
    return rows


def print_table(rows: list[list[str]]) -> None:
    head = ["kernel", "shape", "status", "exact: bytes equal", "random: max |gpu-emu|", "s"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    for row in [head, ["-" * w for w in widths], *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--item", help=argparse.SUPPRESS)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--only", help="only kernels whose label contains this")
    ap.add_argument("--no-tactics", action="store_true", help="examples only")
    ap.add_argument("--no-gpu", action="store_true", help="emulation only, against the "
                    "reference (checks the script where there is no GPU)")
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu_vs_emulation.json")
    args = ap.parse_args(argv)

    if args.item:
        result = run_item(json.loads(args.item), args.cache or Path(tempfile.gettempdir()),
                          gpu=not args.no_gpu)
        print(json.dumps(result))
        return 0

    from cake_core.emulate.build import NoHostCompilerError, find_host_compiler
    from cake_core.run.device import available_backends, probe_gpu

    try:
        find_host_compiler()
    except NoHostCompilerError as exc:
        print(f"gpu_vs_emulation: {exc}", file=sys.stderr)
        return 2
    gpu = not args.no_gpu
    if gpu and not (probe_gpu().present and available_backends()):
        print("gpu_vs_emulation: no GPU with pycuda or torch here; --no-gpu runs the "
              "emulation side alone", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cake-gve-") as tmp:
        items = work_items(not args.no_tactics, args.only, Path(tmp))
        cache = args.cache or Path(tmp) / "cache"
        print(f"{len(items)} kernel shapes, {args.jobs} at a time", flush=True)
        results = run_items(items, args.jobs, args.timeout, gpu, cache)
    rows = summary_rows(results)
    print_table(rows)
    bad = [r for r in results if r["status"] != "ok"]
    wall = time.perf_counter() - t0
    print(f"\n{len(results) - len(bad)}/{len(results)} agree; {wall:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "seconds": round(wall, 1), "results": results},
                                   indent=1), encoding="utf-8")
    print(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
