"""`cake cost` and `cake calibrate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from cost_support import ROOT

from cake_cli.main import main

GEMM = str(ROOT / "examples" / "gemm_sm90.cake")
DIMS = ["--dims", "M=4096,N=4096,K=4096"]

#: The keys of `cake cost --format json` (schema cake.cost/1); changing them is an API change.
TOP_KEYS = {"schema", "file", "calibration_file", "predictions"}
PREDICTION_KEYS = {"kernel", "target", "arch", "gpu", "dims", "calibration", "time_s", "tflops",
                   "roofline_fraction", "roofline_s", "roofline_bound", "floors",
                   "dram_bytes_per_s", "bottleneck", "bottleneck_detail",
                   "categories", "terms", "work", "grid", "blocks", "blocks_per_sm", "waves",
                   "resources", "lines", "warnings"}
RESOURCE_KEYS = {"smem_bytes", "smem_padding", "smem_source", "smem_slots", "registers",
                 "occupancy", "warnings"}
LINE_KEYS = {"line", "share", "time_s", "category", "ops"}


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_text_report() -> None:
    code, out, _ = run("cost", GEMM, *DIMS, "--gpu", "H200")
    assert code == 0
    assert "gemm_sm90 (sm_90a) on H200-SXM" in out
    assert "[uncalibrated defaults]" in out
    assert "bottleneck    compute: tensor cores (wgmma bf16" in out
    assert "TFLOP/s" in out and "roofline      " in out and "(tensor cores)" in out
    assert "wgmma(acc, sa[s], sb[s].T)" in out  # source text is not taken for markup


def test_json_schema_is_stable() -> None:
    code, out, _ = run("cost", GEMM, *DIMS, "--gpu", "h200", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == TOP_KEYS
    assert doc["schema"] == "cake.cost/1"
    (p,) = doc["predictions"]
    assert set(p) == PREDICTION_KEYS
    assert set(p["resources"]) == RESOURCE_KEYS
    assert all(set(ln) == LINE_KEYS for ln in p["lines"])
    assert p["calibration"] == "uncalibrated defaults"
    assert p["bottleneck"] == "compute"
    assert p["dims"] == {"M": 4096, "N": 4096, "K": 4096}
    assert p["roofline_bound"] == "tensor"
    assert set(p["floors"]) == {"tensor", "cuda", "dram", "l2", "smem"}


def test_usage_errors_exit_2() -> None:
    code, _, err = run("cost", GEMM, "--dims", "M=4096")
    assert code == 2 and "K, N" in err
    code, _, err = run("cost", GEMM, *DIMS, "--gpu", "TPU")
    assert code == 2 and "unknown GPU" in err
    code, _, err = run("cost", GEMM, *DIMS, "--gpu", "A100")
    assert code == 2 and "sm_90a" in err
    code, _, err = run("cost", GEMM, "--dims", "M=x")
    assert code == 2
    code, _, err = run("cost", "no/such/file.cake", *DIMS)
    assert code == 2


def test_a_file_with_errors_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cake"
    bad.write_text("@kernel(arch=\"sm_90a\", grid=(1,), warps=4)\ndef k(A: Tensor[bf16, (8,)]):\n"
                   "    x = undefined_name\n")
    code, _, err = run("cost", str(bad))
    assert code == 1 and "has errors" in err


def test_calibrate_then_cost_with_the_calibration(tmp_path: Path) -> None:
    runs = [{"kernel": GEMM, "dims": "M=4096,N=4096,K=4096", "gpu": "H200", "measured_ms": 0.19},
            {"kernel": GEMM, "dims": "M=8192,N=8192,K=8192", "gpu": "H200", "measured_ms": 1.45},
            {"kernel": str(ROOT / "examples" / "tinygemm_sm90.cake"),
             "dims": "M=16,N=8192,K=8192", "gpu": "H200", "measured_ms": 0.045}]
    results = tmp_path / "h200-runs.json"
    results.write_text(json.dumps(runs))
    out_file = tmp_path / "cal.json"
    code, out, err = run("calibrate", str(results), "-o", str(out_file),
                         "--fit", "hbm_efficiency,tensor_efficiency.wgmma")
    assert code == 0, err
    assert "h200-runs: sm_90a, 3 runs" in out and "rms log error" in out
    cal = json.loads(out_file.read_text())
    assert cal["schema"] == "cake.calibration/1" and cal["arch"] == "sm_90a"
    assert set(cal["coefficients"]) == {"hbm_efficiency", "tensor_efficiency.wgmma"}
    assert len(cal["provenance"]["runs"]) == 3
    code, out, _ = run("cost", GEMM, *DIMS, "--gpu", "H200", "--calibration", str(out_file),
                       "--format", "json")
    assert code == 0
    assert json.loads(out)["predictions"][0]["calibration"] == "h200-runs"
    code, _, err = run("cost", str(ROOT / "examples" / "gemm_sm80.cake"), *DIMS,
                       "--calibration", str(out_file))
    assert code == 2 and "no calibration for sm_80" in err


def test_calibrate_usage_errors(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    results.write_text("[]")
    code, _, err = run("calibrate", str(results))
    assert code == 2 and "non-empty" in err
    results.write_text(json.dumps([{"kernel": GEMM, "dims": "M=1,N=1,K=1",
                                    "measured_ms": 1}]))
    code, _, err = run("calibrate", str(results), "--fit", "warp_speed")
    assert code == 2 and "warp_speed" in err
