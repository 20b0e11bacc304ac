"""`numalab top` as text: a table per node, and the `--format json` document.

The JSON is a stable, versioned structure (documented in README.md, "numalab top"): scripts read it
instead of the table, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from typing import Any

from numa_align.cpulist import format_cpulist
from numa_align.nrt_api import ALLOCATIONS_ANNOTATION

from numalab.top.model import CellView, NodeView, PodHold
from numalab.top.nrt import Amount

JSON_VERSION = 1
_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
HEADER = ("CELL", "CPUS tot/alloc/used", "MEMORY tot/alloc/used", "HUGEPAGES tot/alloc/used",
          "DEVICES tot/alloc/used", "PODS")


def human_bytes(value: int) -> str:
    """Bytes for a person: 8589934592 -> "8Gi", 7301444403 -> "6.8Gi", 512 -> "512"."""
    for suffix, unit in _UNITS:
        if value >= unit:
            whole, rest = divmod(value, unit)
            return f"{whole}{suffix}" if rest == 0 else f"{value / unit:.1f}{suffix}"
    return str(value)


def amount_text(amount: Amount | None, in_bytes: bool = False) -> str:
    """"total/allocatable/used" of one resource, "-" when the zone does not list it."""
    if amount is None:
        return "-"
    show = human_bytes if in_bytes else str
    return f"{show(amount.capacity)}/{show(amount.allocatable)}/{show(amount.used)}"


def hugepages_text(cell: CellView) -> str:
    """"2Mi 512Mi/512Mi/0" per page size, "-" for none."""
    return ", ".join(f"{size} {amount_text(a, True)}" for size, a in sorted(cell.hugepages.items())) or "-"


def devices_text(cell: CellView) -> str:
    """"numa-0 3/3/1" per device resource (numa-align's prefix dropped), "-" for none."""
    return ", ".join(f"{name.removeprefix('numa-align/')} {amount_text(a)}"
                     for name, a in sorted(cell.devices.items())) or "-"


def format_table(views: list[NodeView]) -> str:
    """Every node: its policy line, one row per cell (extra rows for more pods), its pods and warnings."""
    blocks = [_node_block(view) for view in views]
    return "\n\n".join(blocks) if blocks else "no nodes"


def as_json(views: list[NodeView]) -> dict[str, Any]:
    """The `--format json` document: {"version": 1, "nodes": [...]} (fields described in README.md)."""
    return {"version": JSON_VERSION, "nodes": [_node_json(view) for view in views]}


def hold_text(cpus: tuple[int, ...], memory: int, devices: dict[str, int], spans: tuple[int, ...] = ()) -> str:
    """What a pod holds: "cpus 2-3, mem 1Gi, numa-0×1" (split guessed: its CPUs span cells)."""
    parts = []
    if cpus:
        parts.append(f"cpus {format_cpulist(cpus)}" + (" (split guessed)" if spans else ""))
    if memory:
        parts.append(f"mem {human_bytes(memory)}")
    parts.extend(f"{name.removeprefix('numa-align/')}×{count}" for name, count in sorted(devices.items()))
    return ", ".join(parts) or "nothing"


def _node_block(view: NodeView) -> str:
    title = view.name
    if view.has_nrt:
        title += f"  topology manager: {view.policy or '?'}, scope {view.scope or '?'}"
    lines = [title]
    if view.cells:
        rows = [HEADER]
        for cell in view.cells:
            rows.extend(_cell_rows(cell, view.allocations_published))
        widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
        lines.extend("  " + "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
    if view.has_nrt and not view.allocations_published:
        lines.append(f"  pods: not published (no {ALLOCATIONS_ANNOTATION} annotation): counts only")
    if view.audit is not None:
        lines.append("  " + view.audit.text())
    for pod in view.pods:
        lines.append("  pod " + _pod_text(pod))
    lines.extend(f"  warning: {warning}" for warning in view.warnings)
    return "\n".join(lines)


def _cell_rows(cell: CellView, published: bool) -> list[tuple[str, ...]]:
    cpus = "memory only" if cell.memory_only else amount_text(cell.cpu)
    hugepages, devices = hugepages_text(cell), devices_text(cell)
    pods = [f"{h.pod}: {hold_text(h.cpus, h.memory, dict(h.devices), h.spans)}" for h in cell.holds]
    unknown = sum(square.state == "unknown" for square in cell.squares())
    if published and unknown:
        pods.append(f"({unknown} CPU{'s' if unknown > 1 else ''} held by pods not listed)")
    first = (cell.zone, cpus, amount_text(cell.memory, True), hugepages, devices, pods[0] if pods else "-")
    return [first, *(("", "", "", "", "", pod) for pod in pods[1:])]


def _pod_text(hold: PodHold) -> str:
    alloc = hold.allocation
    state = f"{hold.phase or '?'} {hold.qos or '?'}" if hold.exists else "gone"
    nodes = ",".join(str(n) for n in alloc.numa_nodes) or "?"
    held = hold_text(alloc.cpus, sum(alloc.memory.values()), dict(alloc.devices))
    return f"{alloc.pod} ({state}) NUMA {nodes}: {held}"


def _amount_json(amount: Amount | None) -> dict[str, int] | None:
    return None if amount is None else amount.as_dict()


def _node_json(view: NodeView) -> dict[str, Any]:
    return {
        "name": view.name,
        "node_exists": view.node_exists,
        "nrt": view.has_nrt,
        "topology_manager": {"policy": view.policy, "scope": view.scope},
        "attributes": dict(view.attributes),
        "allocations_published": view.allocations_published,
        "cells": [_cell_json(cell) for cell in view.cells],
        "pods": [_pod_json(pod) for pod in view.pods],
        "warnings": list(view.warnings),
        "stale": view.stale,
        "audit": None if view.audit is None else view.audit.as_dict(),
    }


def _cell_json(cell: CellView) -> dict[str, Any]:
    squares = cell.squares()
    held_memory = sum(h.memory for h in cell.holds)
    return {
        "zone": cell.zone,
        "numa_node": cell.numa_id,
        "memory_only": cell.memory_only,
        "cpu": _amount_json(cell.cpu),
        "memory": _amount_json(cell.memory),
        "hugepages": {size: a.as_dict() for size, a in sorted(cell.hugepages.items())},
        "devices": {name: a.as_dict() for name, a in sorted(cell.devices.items())},
        "costs": dict(cell.costs),
        "pods": [{"pod": h.pod, "cpus": list(h.cpus), "memory": h.memory, "devices": dict(h.devices),
                  "spans": list(h.spans)} for h in cell.holds],
        "unattributed": {"cpus": sum(s.state == "unknown" for s in squares),
                         "memory": max(0, (cell.memory.used if cell.memory else 0) - held_memory)},
    }


def _pod_json(hold: PodHold) -> dict[str, Any]:
    alloc = hold.allocation
    return {
        "pod": alloc.pod,
        "exists": hold.exists,
        "phase": hold.phase,
        "qos": hold.qos,
        "cpus": format_cpulist(alloc.cpus),
        "numa_nodes": list(alloc.numa_nodes),
        "memory": {str(n): size for n, size in sorted(alloc.memory.items())},
        "devices": dict(sorted(alloc.devices.items())),
    }
