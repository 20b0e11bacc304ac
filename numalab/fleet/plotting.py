"""The fleet bench's plots, drawn by matplotlib (Agg: no display) from results.json's records as PNG files.

One line per side over the sizes for throughput, rejections, NodeResourceTopology writes and scheduler RSS; stranded
CPUs per node as bars per side for each size (per node, so that sizes compare). Sizes on a log axis when they span
more than a factor of ten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
LINES = {
    "throughput.png": ("scheduling throughput", "pods bound per second (burst)", lambda r: r["throughput"]),
    "rejections.png": ("pods the simulated kubelets rejected until full", "pods (symmetric log: 0 shows)",
                       lambda r: r["rejections"]),
    "nrt_writes.png": ("NodeResourceTopology writes while filling", "writes per second",
                       lambda r: r["nrt_writes_per_second"]),
    "rss.png": ("scheduler memory", "peak RSS, MiB", lambda r: None if r["rss_peak"] is None else r["rss_peak"] / MiB),
}
SYMLOG = {"rejections.png"}
"""Plots whose values span zero to thousands (a NUMA-aware side's handful beside the default side's loop)."""


def _series(records: Sequence[Mapping[str, Any]], value: Any) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        y = value(record)
        if y is not None:
            series.setdefault(record["side"], []).append((record["nodes"], y))
    return {side: sorted(points) for side, points in series.items()}


def draw(records: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """Write every plot under `out`; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted({record["nodes"] for record in records})
    written = []
    for name, (title, label, value) in LINES.items():
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for side, points in _series(records, value).items():
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=side)
        _axes(axes, title, label, sizes)
        if name in SYMLOG:
            axes.set_yscale("symlog", linthresh=1)
            axes.set_ylim(bottom=0)
        written.append(_save(figure, out / name, plt))
    figure, axes = plt.subplots(figsize=(7, 4.5))
    sides = list(dict.fromkeys(record["side"] for record in records))
    width = 0.8 / max(1, len(sides))
    for i, side in enumerate(sides):
        heights = [next((r["packing"]["stranded_cpus"] / r["packing"]["nodes"] for r in records
                         if r["side"] == side and r["nodes"] == size and r["packing"]["nodes"]), 0) for size in sizes]
        axes.bar([x + i * width for x in range(len(sizes))], heights, width, label=side)
    axes.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(sizes))], [f"{s:,} nodes" for s in sizes])
    axes.set_title("stranded CPUs when full (free CPUs outside a node's largest free cell)")
    axes.set_ylabel("CPUs per node (mean)")
    axes.legend(fontsize="small")
    written.append(_save(figure, out / "stranded.png", plt))
    return written


def _axes(axes: Any, title: str, label: str, sizes: list[int]) -> None:
    axes.set_title(title)
    axes.set_xlabel("nodes")
    axes.set_ylabel(label)
    if len(sizes) > 1 and sizes[-1] > 10 * sizes[0]:
        axes.set_xscale("log")
    axes.set_xticks(sizes, [f"{s:,}" for s in sizes])
    axes.minorticks_off()
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")


def _save(figure: Any, path: Path, plt: Any) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
