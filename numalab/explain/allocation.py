"""The node's cells while one pod is admitted: what each container takes, and what init containers leave
for the containers after them to reuse (cpumanager updateCPUsToReuse, memorymanager updatePodReusableMemory,
devicemanager devicesToReuse).

Counts per cell only: which CPU ids the kubelet takes inside a cell is not modelled (the object has no ids),
and a take wider than one cell fills the hint's cells in id order, which is how explain reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from numalab.explain.merging import Mask
from numalab.explain.node_state import Cell, NodeState


class AllocationError(Exception):
    """A manager's Allocate failed: the kubelet wraps it as UnexpectedAdmissionError unless the error names its own
    reason (admission.Error's Type(): `kind`, as SMTAlignmentError)."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Working:
    """Mutable per-cell availability for one admission; reusable: what init containers hold for reuse."""

    available: dict[int, dict[str, int]]
    groups: dict[int, frozenset[int]]
    reusable: dict[str, dict[int, int]] = field(default_factory=dict)
    reusable_memory: dict[Mask, dict[str, int]] = field(default_factory=dict)
    physical: dict[int, int] = field(default_factory=dict)
    """Free CPUs outside reserved CPUs' cores per cell (Cell.physical_cpus), for full-pcpus-only."""
    free_cores: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, state: NodeState) -> Working:
        return cls({c.id: dict(c.available) for c in state.cells}, dict(state.memory_groups or {}),
                   physical={c.id: c.physical_cpus or 0 for c in state.cells},
                   free_cores={c.id: c.free_cores or 0 for c in state.cells})

    def check_whole_cores(self, count: int, per_core: int) -> None:
        """cpumanager enforceSMTAlignment (full-pcpus-only): a multiple of the CPUs per core, and no more than the
        node's free CPUs outside reserved CPUs' cores (GetAvailablePhysicalCPUs, every cell)."""
        if count % per_core:
            raise AllocationError(f"SMT Alignment Error: requested {count} cpus not multiple cpus per core = "
                                  f"{per_core}", "SMTAlignmentError")
        physical = sum(self.physical.values())
        if count > physical:
            raise AllocationError(f"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = "
                                  f"{physical}, requested CPUs = {count}, CPUs per core = {per_core}",
                                  "SMTAlignmentError")

    def take_cores(self, freed: dict[int, int], per_core: int) -> list[int]:
        """Account CPUs taken from the free pool ({cell: count}) in whole cores first, as takeByTopologyNUMAPacked
        takes them (takeFullCores before takeRemainingCPUs); the cells where threads of partly held cores were taken."""
        split = []
        for cell, count in freed.items():
            whole = min(self.free_cores.get(cell, 0), count // per_core)
            self.free_cores[cell] = self.free_cores.get(cell, 0) - whole
            self.physical[cell] = max(0, self.physical.get(cell, 0) - count)
            if count > whole * per_core:
                split.append(cell)
        return split

    def cells(self, state: NodeState) -> list[Cell]:
        """The node's cells with what is still available."""
        return [replace(c, available=self.available[c.id]) for c in state.cells]

    def take(self, resource: str, count: int, mask: Mask | None, kind: str) -> dict[int, int]:
        """CPUs or devices for one container: from the hint's cells first (reusable, then free), then any;
        {cell: count}. AllocationError when the node has too few."""
        reusable = self.reusable.setdefault(resource, {})
        total = sum(a.get(resource, 0) for a in self.available.values()) + sum(reusable.values())
        if total < count:
            if resource == "cpu":
                raise AllocationError(f"not enough cpus available to satisfy request: requested={count}, "
                                      f"available={total}")
            raise AllocationError(f"requested number of devices unavailable for {resource}. Requested: {count}, "
                                  f"Available: {total}")
        order = sorted(self.available, key=lambda cell: (mask is not None and cell not in mask, cell))
        taken: dict[int, int] = {}
        left = count
        for pool in ("reusable", "free"):
            for cell in order:
                have = reusable.get(cell, 0) if pool == "reusable" else self.available[cell].get(resource, 0)
                got = min(have, left)
                if got <= 0:
                    continue
                left -= got
                taken[cell] = taken.get(cell, 0) + got
                if pool == "reusable":
                    if kind == "init":
                        continue  # stays reusable for the containers after it
                    reusable[cell] -= got
                else:
                    self.available[cell][resource] -= got
                    if kind == "init":
                        reusable[cell] = reusable.get(cell, 0) + got
        return taken

    def take_memory(self, requests: dict[str, int], mask: Mask, kind: str) -> None:
        """memorymanager updateMachineState: each type from the mask's cells in order, less what init
        containers placed on the same mask leave for reuse; the mask becomes those cells' group."""
        reuse = self.reusable_memory.setdefault(mask, {})
        for resource, size in requests.items():
            left = max(0, size - reuse.get(resource, 0))
            for cell in sorted(mask):
                free = self.available[cell].get(resource, 0)
                got = min(free, left)
                self.available[cell][resource] = free - got
                left -= got
            if kind == "init":
                reuse[resource] = max(reuse.get(resource, 0), size)
            else:
                reuse[resource] = max(0, reuse.get(resource, 0) - size)
        for cell in mask:
            self.groups[cell] = mask
