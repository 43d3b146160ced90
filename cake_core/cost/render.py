"""The text report of cost predictions: a summary per kernel and its per-line table.

Shared by `cake cost` and the language server's `cake.cost` command, so the editor shows
the same table as the terminal.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from cake_core.cost.model import Prediction
    from cake_core.source import SourceFile


def _us(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


_FLOOR_NAMES = {"tensor": "tensor cores", "cuda": "CUDA cores", "dram": "DRAM bandwidth",
                "l2": "L2 bandwidth", "smem": "shared-memory bandwidth"}


def _throughput(p: Prediction) -> str:
    """TFLOP/s for a kernel that uses the tensor cores; DRAM bytes per second for one that
    does not (a vector add has no FLOP rate worth reading)."""
    if p.tensor_flops > 0:
        return f"{p.tflops:.1f} TFLOP/s (tensor, executed)"
    rate = p.dram_bytes_per_s
    text = f"{rate / 1e9:,.0f} GB/s DRAM"
    if p.cuda_ops > 0:
        text += f"; {p.cuda_ops / p.seconds / 1e12:.2f} T CUDA-core ops/s"
    return text


def render_predictions(preds: list[Prediction], src: SourceFile, *, color: bool = False,
                       min_share: float = 0.001) -> str:
    """The text report: a summary per kernel and its per-line table (rich, no colour in
    pipes)."""
    buf = io.StringIO()
    console = Console(file=buf, width=110, force_terminal=color, color_system="auto"
                      if color else None, highlight=False, markup=False)
    for p in preds:
        dims = " ".join(f"{k}={v}" for k, v in p.dims.items())
        head = Text(p.kernel, style="bold")
        head.append(f" ({p.target}) on {p.gpu} ({p.arch})  {dims}  [{p.calibration}]")
        console.print(head)
        occ = p.resources.occupancy
        regs = ", ".join(
            f"{name} {r.allocated}" + (" (setmaxnreg)" if r.ceiling is not None else "")
            + f" [est. {r.low}-{r.high}]" for name, r in p.resources.registers.items())
        cats = ", ".join(f"{k} {v / p.seconds:.0%}" for k, v in sorted(
            p.categories.items(), key=lambda kv: -kv[1]) if v / p.seconds >= 0.005)
        summary = Table.grid(padding=(0, 2))
        summary.add_column(style="dim")
        summary.add_column()
        summary.add_row("time", _us(p.seconds))
        summary.add_row("throughput", _throughput(p))
        floor_key, floor_s = p.kernel_floor
        summary.add_row("roofline", f"{_us(p.roofline_seconds)} "
                        f"({_FLOOR_NAMES[p.roofline_bound]}), {p.roofline_fraction:.0%} "
                        f"reached; kernel floor {_us(floor_s)} ({_FLOOR_NAMES[floor_key]})")
        summary.add_row("bottleneck", f"{p.bottleneck}: {p.bottleneck_detail}")
        summary.add_row("time by kind", cats)
        grid = " x ".join(str(g) for g in p.grid)
        summary.add_row("grid", f"{grid} = {p.blocks} blocks, {p.blocks_per_sm} per SM "
                        f"(limited by {occ.limited_by}), {p.waves:.2f} waves")
        summary.add_row("smem", f"{p.resources.smem.total:,} B per block")
        summary.add_row("registers", regs)
        for w in p.warnings:
            summary.add_row("warning", w)
        console.print(summary)
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("line", justify="right")
        table.add_column("share", justify="right")
        table.add_column("time", justify="right")
        table.add_column("kind")
        table.add_column("source", overflow="ellipsis", no_wrap=True, max_width=64)
        hidden = 0
        for ln in p.lines:
            if ln.share < min_share:
                hidden += 1
                continue
            text = src.line_text(ln.line - 1).strip() if ln.line - 1 < src.line_count else ""
            table.add_row(str(ln.line), f"{ln.share:.1%}", _us(ln.seconds), ln.category,
                          Text(text))
        console.print(table)
        if hidden:
            console.print(f"({hidden} more lines below {min_share:.1%})", style="dim")
        console.print()
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())
