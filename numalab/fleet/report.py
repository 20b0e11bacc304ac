"""The fleet bench's results as text: the table it prints, and the JSON it writes beside the plots."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from numalab.fleet.measures import Packing, SideResult

MiB = 1024 * 1024
COLUMNS = ("nodes", "side", "bound/s", "p50 ms", "p99 ms", "burst p50", "burst p99", "rejected", "remade",
           "CPU alloc", "stranded", "NRT w/s", "RSS MiB", "kubelet p99", "full")
LEGEND = """\
bound/s: pods bound per second in the burst (to its 95th-percentile bind); p50/p99 ms: creation to binding at the
fixed rate; burst p50/p99: the same in the burst, seconds; rejected: pods the simulated kubelets turned away
until full; remade: pods ReplicaSets made again for rejected replicas; CPU alloc: CPUs requested by admitted pods
over the Nodes' allocatable when full; stranded: free CPUs outside each node's largest free cell (numa-align's
auditor), summed; NRT w/s: NodeResourceTopology writes (kube-apiserver's count) per second of filling; RSS: the
side's scheduler's peak; kubelet p99: seconds from a bound pod reaching the simulated kubelets to its object and
status written; full: no (timed out) if the side never filled."""


def _ms(pair: tuple[float, float] | None, index: int) -> str:
    return "-" if pair is None else f"{pair[index] * 1000:.0f}"


def _s(pair: tuple[float, float] | None, index: int) -> str:
    return "-" if pair is None else f"{pair[index]:.2f}"


def row(result: SideResult) -> tuple[str, ...]:
    packed = result.packing
    return (
        str(result.nodes), result.side,
        "-" if result.throughput is None else f"{result.throughput:.1f}",
        _ms(result.rate_latency, 0), _ms(result.rate_latency, 1),
        _s(result.burst_latency, 0), _s(result.burst_latency, 1),
        str(result.rejections), str(max(0, result.seen - result.offered)),
        f"{packed.allocated_share:.1%}", str(packed.stranded_cpus),
        f"{result.nrt_writes_per_second:.1f}",
        "-" if result.rss_peak is None else f"{result.rss_peak / MiB:.0f}",
        _s(result.kubelet_lag, 1),
        "yes" if result.full else "no",
    )


def table(results: Iterable[SideResult]) -> str:
    """One row per size and side, columns aligned (the first two left, the rest right)."""
    rows = [COLUMNS, *map(row, results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths,
                                                                                               strict=True)))
             for r in rows]
    return "\n".join(lines)


PAIRS = ("rate_latency", "burst_latency", "kubelet_lag")


def from_json(record: Mapping[str, Any]) -> SideResult:
    """The result as_json wrote (its derived figures dropped): a resumed run's sides."""
    data = {f.name: record[f.name] for f in dataclasses.fields(SideResult) if f.name in record}
    data["packing"] = Packing(**record["packing"])
    for name in PAIRS:
        if data.get(name) is not None:
            data[name] = tuple(data[name])
    return SideResult(**data)


def as_json(results: Sequence[SideResult]) -> list[dict[str, Any]]:
    """Every field of every result, and the derived ones the table shows."""
    out = []
    for result in results:
        data = dataclasses.asdict(result)
        data.update(rejections=result.rejections, remade=max(0, result.seen - result.offered),
                    allocated_share=result.packing.allocated_share,
                    nrt_writes_per_second=result.nrt_writes_per_second,
                    nrt_reads_per_second=result.nrt_reads / result.fill_seconds if result.fill_seconds > 0 else 0.0)
        out.append(data)
    return out
