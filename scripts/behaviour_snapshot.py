"""Record what the compiler says about every kernel the repository ships, to compare later.

A restructuring of the compiler (where a primitive's facets live, how analyses dispatch on
them) must not change what users see.  This script records, for every `.cake` file under
examples/, tests/, bench/data/ and plugins/:

- the diagnostics of `check_source` (code, severity, message, range, related ranges,
  notes, fixes) in the JSON form agents read;
- the resource table of each kernel that checks without errors;
- the cost prediction of each such kernel at its headline dims on every GPU that can run
  it (`Prediction.to_json()`, floats as `repr` so a last-bit change shows);
- the lowered CUDA and its metadata;
- the simulator's verdict and findings for every example a task lists (`cake run --sim`).

    python scripts/behaviour_snapshot.py record before.json
    python scripts/behaviour_snapshot.py record after.json
    python scripts/behaviour_snapshot.py compare before.json after.json

`compare` prints every entry that differs and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TREES = ("examples", "tests", "bench/data", "plugins")
SIM_TASKS = {
    "examples/kmeans_assign_sm90.cake": "kmeans_assign",
    "examples/gemm_sm90.cake": "gemm_bf16",
    "examples/tinygemm_sm90.cake": "gemm_bf16",
    "examples/gemm_sm80.cake": "gemm_f16_sm80",
}


def _files() -> list[Path]:
    out: list[Path] = []
    for tree in TREES:
        out.extend(sorted((ROOT / tree).rglob("*.cake")))
    return out


def _exact(value: Any) -> Any:
    """JSON with floats written as repr, so that a change in the last bit is a change."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _exact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(v) for v in value]
    return value


def _record_file(path: Path) -> dict[str, Any]:
    from cake_core.check import check_source
    from cake_core.cost.model import CostError, predict
    from cake_core.diagnostics.json_format import diagnostic_to_json
    from cake_core.hardware import GPUS, get_arch
    from cake_core.lower import lower_checked
    from cake_core.rewrite_cost import headline_dims
    from cake_core.source import SourceFile
    from cake_core.verify.resources import render_resource_table, resource_table

    rel = path.relative_to(ROOT).as_posix()
    src = SourceFile.read(path, rel)
    res = check_source(src)
    entry: dict[str, Any] = {
        "diagnostics": [diagnostic_to_json(d, src) for d in res.diagnostics],
    }
    if res.errors or res.program is None:
        return entry
    kernels: dict[str, Any] = {}
    for k in res.program.kernels:
        info: dict[str, Any] = {}
        spec = get_arch(k.arch)
        if spec is not None:
            info["resources"] = render_resource_table(resource_table(k, spec))
        dims, origin = headline_dims(k, src)
        info["dims"] = [dims, origin]
        preds: dict[str, Any] = {}
        for gpu_name, gpu in GPUS.items():
            try:
                preds[gpu_name] = _exact(predict(k, dims, gpu).to_json())
            except CostError as exc:
                preds[gpu_name] = f"CostError: {exc}"
        info["cost"] = preds
        kernels[k.name] = info
    entry["kernels"] = kernels
    lowered = lower_checked(res)
    entry["lower"] = {
        "cu_sha256": hashlib.sha256((lowered.cu or "").encode()).hexdigest(),
        "cu": lowered.cu,
        "meta": _exact(lowered.meta),
        "diagnostics": [diagnostic_to_json(d, src) for d in lowered.diagnostics],
    }
    return entry


#: Keys whose values are wall-clock measurements, not behaviour.
VOLATILE = frozenset({"seconds"})


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _record_sim(rel: str, task: str) -> dict[str, Any]:
    cake = Path(sys.executable).with_name("cake")
    proc = subprocess.run([str(cake), "run", rel, "--task", task, "--sim", "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    try:
        body: Any = json.loads(proc.stdout)
    except json.JSONDecodeError:
        body = {"stdout": proc.stdout, "stderr": proc.stderr[-2000:]}
    return {"exit": proc.returncode, "report": _without_timings(body)}


def record(out: Path, *, sim: bool) -> None:
    snap: dict[str, Any] = {"files": {}, "sim": {}}
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        try:
            snap["files"][rel] = _record_file(path)
        except Exception as exc:  # a fault is part of the behaviour being recorded
            snap["files"][rel] = {"fault": f"{type(exc).__name__}: {exc}"}
        print(f"recorded {rel}", file=sys.stderr)
    if sim:
        for rel, task in SIM_TASKS.items():
            snap["sim"][rel] = _record_sim(rel, task)
            print(f"simulated {rel} ({task})", file=sys.stderr)
    out.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(snap['files'])} files, {len(snap['sim'])} simulations")


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                out.append(f"{where}/{key}: only after")
            elif key not in b:
                out.append(f"{where}/{key}: only before")
            else:
                _diff(a[key], b[key], f"{where}/{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}:\n  before: {str(a)[:300]}\n  after:  {str(b)[:300]}")


def compare(before: Path, after: Path) -> int:
    a = _without_timings(json.loads(before.read_text(encoding="utf-8")))
    b = _without_timings(json.loads(after.read_text(encoding="utf-8")))
    diffs: list[str] = []
    _diff(a, b, "", diffs)
    n_files, n_sim = len(a["files"]), len(a["sim"])
    n_kernels = sum(len(f.get("kernels", {})) for f in a["files"].values())
    n_diags = sum(len(f.get("diagnostics", [])) for f in a["files"].values())
    print(f"{n_files} files, {n_diags} diagnostics, {n_kernels} kernels priced on every GPU "
          f"and lowered, {n_sim} simulations")
    for d in diffs:
        print(d)
    print("identical" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="write a snapshot")
    rec.add_argument("out", type=Path)
    rec.add_argument("--no-sim", action="store_true", help="skip the simulations (faster)")
    cmp = sub.add_parser("compare", help="compare two snapshots")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args.out, sim=not args.no_sim)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
