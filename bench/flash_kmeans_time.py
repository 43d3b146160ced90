"""flash-kmeans's Triton assignment kernel against the torch reference, at the headline shape.

Run by `bench/gpu_check.py` in its own process (Triton and torch state stay out of the
parent, and a hang costs only this step's timeout).  Writes one JSON object to --out:

    {"status": "ok" | "skipped" | "wrong" | "error", "reason": ..., "flash_ms": ...,
     "torch_ms": ..., ...}

`skipped` when the package, torch, Triton or a GPU is missing (the reason says which).  The
inputs follow the kmeans_assign task's distribution (points near bf16 centroids), drawn on
the GPU; the reference is the runner's own torch baseline for that task.  The kernel's
answer is checked against it before timing and again after: an index that differs counts
as wrong only when its distance exceeds the best one by more than the task's tolerance
(near-ties may go either way in f32).  Timing: `gpu_headline.time_sides`.

    python bench/flash_kmeans_time.py --out flash.json [--rounds 5 --calls 10 --warmup 3]

Exit status 0 whatever the outcome (the JSON says it); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_headline import KMEANS_D, KMEANS_SHAPE, time_sides  # noqa: E402

from cake_core.run.protocol import TimingConfig  # noqa: E402

#: kmeans_assign's tolerance on the distance of a differing index (examples/tasks).
REL_TOL = 1e-5


def skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason}


def load_flash() -> tuple[Any, str] | str:
    """The Triton assignment function and the package version, or why not.  The function
    is imported from its own module: the package's top level silently falls back to a torch
    implementation when Triton is unusable, which would time the wrong thing."""
    try:
        import torch
    except Exception as exc:  # any import failure is a reason to skip
        return f"torch cannot be imported: {exc}"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        import triton  # type: ignore[import-not-found]  # noqa: F401 - to name its absence
    except Exception as exc:
        return f"triton cannot be imported: {exc}"
    try:
        from flash_kmeans.assign_euclid_triton import (  # type: ignore[import-not-found]
            euclid_assign_triton,
        )
    except Exception as exc:
        return f"flash-kmeans is not installed or does not import: {type(exc).__name__}: {exc}"
    try:
        from importlib.metadata import version

        ver = version("flash-kmeans")
    except Exception:  # a version is nice to have
        ver = "?"
    return euclid_assign_triton, ver


def mismatches(x: Any, c: Any, got: Any, want: Any, rel_tol: float = REL_TOL) -> tuple[int, int]:
    """(indices that differ, of those beyond tolerance), computed on the GPU in float64 for
    the differing points only."""
    import torch

    diff = (got != want).nonzero()
    if diff.numel() == 0:
        return 0, 0
    b, n = diff[:, 0], diff[:, 1]
    k = c.shape[1]
    g, w = got[b, n].long(), want[b, n].long()
    inside = (g >= 0) & (g < k)
    xs = x[b, n].double()
    cg = c[b, g.clamp(0, k - 1)].double()
    cw = c[b, w].double()
    d_got = ((xs - cg) ** 2).sum(-1)
    d_want = ((xs - cw) ** 2).sum(-1)
    scale = (xs ** 2).sum(-1) + (cw ** 2).sum(-1)
    bad = ~inside | (d_got - d_want > rel_tol * scale)
    return int(diff.shape[0]), int(torch.count_nonzero(bad))


def run(args: argparse.Namespace) -> dict[str, Any]:
    found = load_flash()
    if isinstance(found, str):
        return skipped(found)
    assign, ver = found
    import torch

    from cake_core.run.baselines import TORCH_BASELINES
    from cake_core.run.torch_device import TorchDevice

    device = TorchDevice()
    stream = device.new_stream()
    b, n, k, d = KMEANS_SHAPE["B"], KMEANS_SHAPE["N"], KMEANS_SHAPE["K"], KMEANS_D
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    with torch.cuda.stream(stream):
        c = torch.randn((b, k, d), generator=gen, device="cuda").to(torch.bfloat16)
        pick = torch.randint(0, k, (b, n), generator=gen, device="cuda")
        x = (torch.gather(c.float(), 1, pick[..., None].expand(b, n, d))
             + 0.5 * torch.randn((b, n, d), generator=gen, device="cuda")).to(torch.bfloat16)
        cn = (c.double() ** 2).sum(-1).float()
        x_sq = (x.float() ** 2).sum(-1)  # flash-kmeans's input contract, outside the timing
        out = torch.empty((b, n), dtype=torch.int32, device="cuda")
    reference = TORCH_BASELINES["kmeans_assign"][1]
    tensors = {"X": x, "C": c, "Cn": cn}
    note: list[str] = []

    def flash_call(xx: Any, cc: Any) -> None:
        with torch.cuda.stream(stream):
            assign(xx, cc, x_sq, out=out, c_sq=cn)

    def ref_call() -> None:
        with torch.cuda.stream(stream):
            reference(tensors)

    with torch.cuda.stream(stream):
        want = reference(tensors)["out"]
    xf, cf = x, c
    try:
        flash_call(xf, cf)
        device.synchronize()
    except Exception as exc:  # bf16 may be outside what it supports
        xf, cf = x.half(), c.half()
        note.append(f"bf16 refused ({type(exc).__name__}), run on the same values in fp16")

    def check(when: str) -> dict[str, Any]:
        with torch.cuda.stream(stream):
            out.fill_(-1)  # an index the kernel never writes stays out of range
        flash_call(xf, cf)
        device.synchronize()
        differ, bad = mismatches(x, c, out, want)
        return {"when": when, "differ": differ, "bad": bad}

    judged = [check("before timing")]
    if not judged[-1]["bad"]:
        nflush = 2 * device.l2_bytes
        flush = device.alloc(nflush)
        device.fill(flush, 0x5A, nflush, stream)  # once, before the warmup; then only read
        times = time_sides(device, stream, flush, nflush,
                           [("torch", ref_call), ("flash", lambda: flash_call(xf, cf))],
                           TimingConfig(args.warmup, args.rounds, args.calls, True))
        judged.append(check("after timing"))
    wrong = [j for j in judged if j["bad"]]
    if wrong:
        return {"status": "wrong", "version": ver, "checks": judged,
                "reason": f"{wrong[0]['bad']} of {b * n} indices beyond tolerance "
                          f"({wrong[0]['when']})"}
    return {"status": "ok", "version": ver, "dims": {**KMEANS_SHAPE, "D": d},
            "flash_ms": times["flash"].median_ms, "torch_ms": times["torch"].median_ms,
            "flash_rounds_ms": times["flash"].rounds_ms,
            "torch_rounds_ms": times["torch"].rounds_ms,
            "flash_cv": times["flash"].cv, "torch_cv": times["torch"].cv,
            "checks": judged, "note": "; ".join(note), "l2_flush_bytes": nflush,
            "device": device.name}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        result = run(args)
    except Exception as exc:  # reported in the JSON, never a traceback
        result = {"status": "error", "reason": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-2000:]}
    result["elapsed_s"] = round(time.monotonic() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"flash-kmeans: {result['status']}"
          + (f" ({result['reason']})" if result.get("reason") else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
