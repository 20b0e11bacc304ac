"""The hint providers' hints, from per-cell counts (k8s.io/kubernetes v1.36.3 pkg/kubelet/cm).

- CPU, static policy: cpumanager generateCPUTopologyHints. Masks over the cells that have CPUs; a mask is a
  hint when its available CPUs (plus CPUs reusable from init containers, which must all lie inside it) cover
  the request; preferred when as wide as the narrowest mask whose CPUs in total (reserved included) could.
- memory and hugepages, Static policy: memorymanager calculateHints. Masks over every cell; allocatable must
  cover the request (that sets the minimal width), the single vs multi-NUMA group rule drops masks, free (plus
  reusable) must cover it; preferred = minimal width (isHintPreferred). No mask: no hints at all.
- devices: devicemanager generateDeviceTopologyHints over the cells holding the resource (numa-align/numa-N:
  cell N only); too few available devices in total: an empty list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalab.explain.merging import Hint, Mask
from numalab.explain.node_state import Cell

PerCell = Mapping[int, int]


def masks(cells: Iterable[int]) -> list[Mask]:
    """bitmask.IterateBitMasks: every non-empty subset, by width, then in lexical order of ids."""
    ids = sorted(cells)
    found: list[Mask] = []

    def grow(start: int, chosen: list[int], size: int) -> None:
        if len(chosen) == size:
            found.append(frozenset(chosen))
            return
        for i in range(start, len(ids)):
            grow(i + 1, [*chosen, ids[i]], size)

    for size in range(1, len(ids) + 1):
        grow(0, [], size)
    return found


def _preferred_if(hints: list[Mask], width: int) -> list[Hint]:
    return [Hint(mask, len(mask) == width) for mask in hints]


def cpu_hints(cells: Iterable[Cell], request: int, reusable: PerCell) -> list[Hint]:
    with_cpus = [c for c in cells if c.capacity.get("cpu", 0) > 0]
    width = len(with_cpus)
    fitting: list[Mask] = []
    for mask in masks(c.id for c in with_cpus):
        in_mask = [c for c in with_cpus if c.id in mask]
        if sum(c.capacity["cpu"] for c in in_mask) >= request:
            width = min(width, len(mask))
        if any(count and cell not in mask for cell, count in reusable.items()):
            continue
        if sum(c.available.get("cpu", 0) + reusable.get(c.id, 0) for c in in_mask) >= request:
            fitting.append(mask)
    return _preferred_if(fitting, width)


def memory_hints(cells: Iterable[Cell], requests: Mapping[str, int], groups: Mapping[int, frozenset[int]],
                 reusable: Mapping[Mask, Mapping[str, int]]) -> dict[str, list[Hint]]:
    """groups: cell -> the cells of the allocation it already holds memory for (absent: unused).
    reusable: memory of init containers by the mask it was placed on (getPodReusableMemory)."""
    by_id = {c.id: c for c in cells}
    width = len(by_id)
    fitting: list[Mask] = []
    for mask in masks(by_id):
        if any(sum(by_id[i].allocatable.get(r, 0) for i in mask) < size for r, size in requests.items()):
            continue
        width = min(width, len(mask))
        if not _group_allows(mask, groups):
            continue
        if all(sum(by_id[i].available.get(r, 0) for i in mask) + reusable.get(mask, {}).get(r, 0) >= size
               for r, size in requests.items()):
            fitting.append(mask)
    if not fitting:
        return {}
    return {resource: _preferred_if(fitting, width) for resource in requests}


def _group_allows(mask: Mask, groups: Mapping[int, frozenset[int]]) -> bool:
    """A cell in a multi-cell group takes no single-cell memory; a cell with single-cell memory (or another
    group) joins no multi-cell mask."""
    if len(mask) == 1:
        (cell,) = mask
        return len(groups.get(cell, mask)) <= 1
    return all(cell not in groups or groups[cell] == mask for cell in mask)


def device_hints(cells: Iterable[Cell], resource: str, request: int, reusable: PerCell) -> list[Hint]:
    """One device-plugin resource; every device of a cell counts as that cell's (numa-align's are)."""
    cells = list(cells)
    holding = [c for c in cells if c.allocatable.get(resource, 0) > 0] or cells
    available = sum(c.available.get(resource, 0) for c in holding) + sum(reusable.values())
    if available < request:
        return []
    width = len(holding)
    fitting: list[Mask] = []
    for mask in masks(c.id for c in holding):
        in_mask = [c for c in holding if c.id in mask]
        if sum(c.allocatable.get(resource, 0) for c in in_mask) >= request:
            width = min(width, len(mask))
        if any(count and cell not in mask for cell, count in reusable.items()):
            continue
        if sum(c.available.get(resource, 0) + reusable.get(c.id, 0) for c in in_mask) >= request:
            fitting.append(mask)
    return _preferred_if(fitting, width)
