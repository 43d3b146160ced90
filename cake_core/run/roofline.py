"""The fastest a shape could possibly run, and which hardware-table entry a GPU is.

A measured time below `max(FLOPs / tensor peak, bytes / HBM bandwidth)` is not a fast
kernel but a broken measurement (work skipped, results cached, L2 kept warm): the floor
uses the dense datasheet peaks, not achievable fractions, so a real kernel never crosses
it.  FLOPs are the task's when it defines `flops(dims)`, else the tensor-core work the
kernel's IR executes (the cost model's count: tiles are padded at ragged edges, so this
can exceed the useful work, which only lowers TFLOP/s).  Bytes are every tensor read or
written once: the compulsory traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cake_core.hardware import GPUS, GpuSpec, default_gpu, get_arch, get_gpu
from cake_core.run.results import Workload
from cake_core.run.tensors import TensorSpec
from cake_core.tasks import Task

#: Hardware-table aliases by the substring a driver's device name contains, longest first
#: so "a100" wins over "a10".
_NAME_KEYS = (("h200", "H200-SXM"), ("h100", "H100-SXM5"), ("b200", "B200"),
              ("a100", "A100-SXM4-80GB"), ("l40s", "L40S"), ("a10", "A10"))


def gpu_for_device(name: str) -> GpuSpec | None:
    """The hardware table's entry for a driver-reported device name ("NVIDIA H200")."""
    direct = get_gpu(name)
    if direct is not None:
        return direct
    low = name.lower()
    return next((GPUS[gpu] for key, gpu in _NAME_KEYS if key in low), None)


def device_gpu(name: str, compute_capability: tuple[int, int]) -> GpuSpec:
    """A GpuSpec to take peaks from: the device's own, else its arch's default."""
    spec = gpu_for_device(name)
    if spec is not None:
        return spec
    major, minor = compute_capability
    arch = get_arch(f"sm_{major}{minor}a") or get_arch(f"sm_{major}{minor}")
    return default_gpu(arch.name if arch else "sm_90a")


def compulsory_bytes(specs: list[TensorSpec], dims: Mapping[str, int]) -> int:
    return sum(s.nbytes(dims) for s in specs)


def kernel_flops(kernel: Any, dims: Mapping[str, int], gpu: GpuSpec) -> float:
    """Tensor FLOPs the IR executes at `dims` (0.0 when the cost model cannot say)."""
    # start-up: only a task without flops() needs the cost model (~40 ms), and only once a
    # GPU was found; without one `cake bench` stops before
    from cake_core.cost.model import CostError, predict

    try:
        return float(predict(kernel, dims, gpu).tensor_flops)
    except (CostError, KeyError, ValueError, ZeroDivisionError):
        return 0.0


def task_flops(task: Task, dims: Mapping[str, int]) -> float | None:
    fn = getattr(task, "flops", None)
    if callable(fn):
        return float(fn(dims))
    return None


def workload(task: Task, kernel: Any, specs: list[TensorSpec], dims: Mapping[str, int],
             gpu: GpuSpec) -> Workload:
    flops = task_flops(task, dims)
    if flops is None:
        flops = kernel_flops(kernel, dims, gpu) if kernel is not None else 0.0
    in_dtype = next((s.dtype.value for s in specs if not s.written and s.dtype.is_float),
                    "bf16")
    peak = gpu.tensor_peak.get(in_dtype) or max(gpu.tensor_peak.values(), default=0.0)
    return Workload(flops, float(compulsory_bytes(specs, dims)), float(peak),
                    float(gpu.hbm_bandwidth), gpu.name)
