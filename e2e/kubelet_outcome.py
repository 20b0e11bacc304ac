"""The kubelet's real verdict on a pod, as the API shows it, and its comparison with `numalab explain`'s.

A rejection is the pod's phase Failed with the kubelet's reason word; an admission is its container statuses,
and the cells come from numa-align's allocations annotation (PodResources' assignment: CPUs, regular memory
and numa-align devices; hugepages are not in it and so not compared).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.devices import node_of_resource

from numalab.top.nrt import Allocation


@dataclass(frozen=True)
class Outcome:
    """verdict: admitted, rejected, or undecided (the kubelet said nothing yet); reason: the kubelet's reason word
    (TopologyAffinityError, OutOfcpu, ...) or why undecided; cells: resource -> NUMA cells it was given."""

    verdict: str
    reason: str = ""
    cells: Mapping[str, list[int]] = field(default_factory=dict)



def observed_cells(allocation: Allocation | None, cell_cpus: Mapping[int, frozenset[int]]) -> dict[str, list[int]]:
    """Cells of what the kubelet gave the pod's app containers and sidecars (PodResources lists no regular init
    container): CPUs by the cells' cpulists, memory blocks by their cell, numa-align devices by their name."""
    if allocation is None:
        return {}
    cells: dict[str, list[int]] = {}
    if allocation.cpus:
        cells["cpu"] = sorted(cell for cell, cpus in cell_cpus.items() if cpus & set(allocation.cpus))
    memory = sorted(cell for cell, size in allocation.memory.items() if size > 0)
    if memory:
        cells["memory"] = memory
    for name, count in allocation.devices.items():
        if count > 0 and (node := node_of_resource(name)) is not None:
            cells[name] = [node]
    return cells


def real_outcome(pod: Mapping[str, Any], allocations: Mapping[str, Allocation] | None,
                 cell_cpus: Mapping[int, frozenset[int]]) -> Outcome:
    """The kubelet's verdict on a pod as read: rejected = phase Failed with the kubelet's reason; admitted = it
    wrote container statuses and the phase is not Failed, its cells from numa-align's allocations annotation."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return Outcome("rejected", str(status.get("reason") or "Failed with no reason"))
    if not (status.get("containerStatuses") or status.get("initContainerStatuses")):
        return Outcome("undecided", f"phase {status.get('phase') or 'unknown'} and no container status")
    meta = pod.get("metadata") or {}
    allocation = (allocations or {}).get(f"{meta.get('namespace')}/{meta.get('name')}")
    return Outcome("admitted", cells=observed_cells(allocation, cell_cpus))


def observable(resource: str) -> bool:
    """What numa-align's annotation shows: CPUs, regular memory and numa-align devices (not hugepages)."""
    return resource in ("cpu", "memory") or node_of_resource(resource) is not None


def _said(verdict: str, reason: str, cells: Mapping[str, list[int]]) -> str:
    if verdict == "admitted":
        return "admitted " + (", ".join(f"{k} {','.join(map(str, v))}" for k, v in sorted(cells.items()))
                              or "with no exclusive cells")
    return f"{verdict} {reason}".strip()


def compare(predicted: Mapping[str, Any], real: Outcome) -> tuple[bool, str]:
    """(agree, "predicted X, kubelet Y") for explain's verdict (NodeVerdict.as_dict) and the kubelet's outcome:
    the same verdict, the same reason word, the same cells for what the annotation shows."""
    verdict = str(predicted.get("verdict"))
    reason = str(predicted.get("reason") or "")
    word = reason.split(":", 1)[0] if verdict == "rejected" else reason
    cells = {k: sorted(v) for k, v in (predicted.get("cells") or {}).items() if observable(k)}
    unseen = sorted(k for k in predicted.get("cells") or {} if not observable(k))
    detail = f"predicted {_said(verdict, word, cells)}, kubelet {_said(real.verdict, real.reason, real.cells)}"
    if unseen and verdict == "admitted":
        detail += f" ({', '.join(unseen)} not in numa-align's annotation: not compared)"
    if verdict != real.verdict:
        return False, detail
    if verdict == "rejected":
        return word == real.reason, detail
    return cells == {k: sorted(v) for k, v in real.cells.items()}, detail
