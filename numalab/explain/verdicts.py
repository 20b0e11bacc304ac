"""Per-node verdicts for one pod over a whole cluster's API objects, and their text and JSON forms.

Pure: lists of API-shaped dicts in. A node without a NodeResourceTopology object, or whose numa-align Lease
lapsed (numalab.top.liveness), gets `no-data` and is judged not at all.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numalab.explain.admission import admit
from numalab.explain.node_state import node_state
from numalab.explain.requests import PodRequest
from numalab.explain.scheduler import numa_aware_filter, scheduler_of
from numalab.top.liveness import leases_by_name, stale_since
from numalab.top.model import NO_NRT
from numalab.top.nrt import owner_node, parse_nrt


@dataclass
class NodeVerdict:
    node: str
    verdict: str
    reason: str
    scheduler: str
    numa_aware_filter: str
    cells: dict[str, list[int]] = field(default_factory=dict)
    hints: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "verdict": self.verdict, "cells": self.cells, "reason": self.reason,
                "hints": self.hints, "scheduler": self.scheduler, "numa_aware_filter": self.numa_aware_filter,
                "notes": self.notes}


def explain(pod: PodRequest, nrts: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
            pods: Iterable[Mapping[str, Any]], leases: Iterable[Mapping[str, Any]] | None = None,
            now: datetime.datetime | None = None, kubelet_configs: Mapping[str, Mapping[str, Any] | None] | None = None,
            only: str | None = None) -> list[NodeVerdict]:
    """One verdict per Node (or only `only`), in name order. leases None: staleness is unknown (noted)."""
    by_node = {owner_node(obj): obj for obj in nrts}
    node_objects = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    pods = list(pods)
    lease_map = None if leases is None else leases_by_name(leases)
    now = now or datetime.datetime.now(datetime.UTC)
    scheduler = scheduler_of(pod)
    verdicts = []
    for name in sorted(set(node_objects) | set(by_node)):
        if only is not None and name != only:
            continue
        obj = by_node.get(name)
        stale = None if obj is None or lease_map is None else stale_since(name, lease_map, now)
        if obj is None or stale is not None:
            why = NO_NRT if obj is None else stale
            verdicts.append(NodeVerdict(name, "no-data", f"{why}: not judged", scheduler, "unknown: no current object"))
            continue
        state = node_state(parse_nrt(obj), node_objects.get(name), pods, (kubelet_configs or {}).get(name))
        outcome = admit(pod, state)
        notes = [*state.notes, *outcome.notes]
        if lease_map is None:
            notes.append("numa-align's Leases could not be read: whether this object is current is unknown")
        verdicts.append(NodeVerdict(name, outcome.verdict, outcome.reason, scheduler, numa_aware_filter(pod, state),
                                    outcome.cells, outcome.hints, notes))
    return verdicts


def as_json(pod: PodRequest, verdicts: Iterable[NodeVerdict]) -> dict[str, Any]:
    return {"pod": pod.name, "qos": pod.qos, "nodes": [v.as_dict() for v in verdicts]}


def _cells(cells: Mapping[str, list[int]]) -> str:
    return ", ".join(f"{name} on cell{'s' if len(ids) > 1 else ''} {','.join(map(str, ids))}"
                     for name, ids in cells.items()) or "no exclusive resources"


def format_text(pod: PodRequest, verdicts: Iterable[NodeVerdict]) -> str:
    lines = [f"pod {pod.name} ({pod.qos})"]
    for v in verdicts:
        head = f"{v.node}: {v.verdict}"
        if v.verdict == "admitted":
            head += f": {_cells(v.cells)}"
        elif v.reason:
            head += f": {v.reason}"
        lines.append(head)
        for key, hints in v.hints.items():
            shown = " ".join(("any" if h["cells"] is None else ",".join(map(str, h["cells"])))  # type: ignore[arg-type]
                             + ("*" if h["preferred"] else "") for h in hints) or "none fit"
            lines.append(f"  hints {key}: {shown}")
        lines.append(f"  scheduler: {v.scheduler}")
        lines.append(f"  numa-aware filter: {v.numa_aware_filter}")
        lines += [f"  note: {note}" for note in v.notes]
    lines.append("(hints: cells, * = preferred)")
    return "\n".join(lines)
