"""NUMA topology: cells with cpus, memory, hugepages, cores, and the distance matrix.

Built from inventory data (`Topology.from_dict`, parsed in topology_data) or from sysfs (numalab.sysfs).
Real servers are not uniform, so the model is not either: a cell may have no online CPU (a memory-only
node: CXL, HBM, GPU memory), no memory, or neither (an online node with nothing to offer: CXL memory taken
offline; the kubelet lists it too, so it counts towards the Topology Manager's NUMA node limit), a cell's
cpulist may hold offline CPUs, ids are sparse, a core may carry several threads, hugepages come in any size
the kernel has, and the distance table may be asymmetric. Validation happens once, in topology_data, so every
later stage (kubelet policy, domain XML, lint, numa-align's advertisement) can trust the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.cell import Cell
from numalab.model.topology_data import LOCAL_DISTANCE, REMOTE_DISTANCE, parse_topology, topology_to_dict


@dataclass(frozen=True)
class Topology:
    """A host's NUMA shape. `distances` is None when the defaults (10 local, 20 remote) apply; `cores` maps
    each online CPU to its core's online threads (None: one thread per core); `packages` maps each online
    CPU to its socket (None: unknown, one per cell)."""

    cells: tuple[Cell, ...]
    distances: Mapping[int, Mapping[int, int]] | None = None
    cores: Mapping[int, frozenset[int]] | None = None
    packages: Mapping[int, int] | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(cell.id for cell in self.cells)

    @property
    def cpus(self) -> frozenset[int]:
        """Every online CPU."""
        return frozenset().union(*(cell.cpus for cell in self.cells))

    @property
    def offline_cpus(self) -> frozenset[int]:
        return frozenset().union(*(cell.offline_cpus for cell in self.cells))

    @property
    def memory(self) -> int:
        return sum(cell.memory for cell in self.cells)

    @property
    def cpu_cells(self) -> tuple[Cell, ...]:
        """Cells with at least one online CPU, in id order."""
        return tuple(cell for cell in self.cells if cell.cpus)

    @property
    def memory_only_cells(self) -> tuple[Cell, ...]:
        return tuple(cell for cell in self.cells if not cell.cpus)

    def core_of(self, cpu: int) -> frozenset[int]:
        """The online threads of `cpu`'s core, `cpu` included."""
        if self.cores is None:
            return frozenset({cpu})
        return self.cores[cpu]

    @property
    def threads_per_core(self) -> int:
        """The most online threads any core has (1 without SMT, or after `nosmt`)."""
        return max((len(core) for core in (self.cores or {}).values()), default=1)

    @property
    def core_list(self) -> tuple[frozenset[int], ...]:
        """Every core once, ordered by its lowest CPU."""
        return tuple(sorted({self.core_of(cpu) for cpu in self.cpus}, key=min))

    def cell(self, cell_id: int) -> Cell:
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(f"no NUMA cell {cell_id} (cells: {format_cpulist(self.ids)})")

    def cell_of_cpu(self, cpu: int) -> Cell:
        for cell in self.cells:
            if cpu in cell.cpus:
                return cell
        raise KeyError(f"cpu {cpu} is in no NUMA cell")

    def distance(self, a: int, b: int) -> int:
        """From cell a to cell b: row a, column b, as the kernel's `node<a>/distance` lists it.

        ACPI's SLIT may give d(a,b) != d(b,a), and each direction is kept: the NRT's costs of zone a are row a
        and a libvirt cell's siblings are its row. Nothing here needs one value per pair; what would (ranking a
        set of cells, as the kubelet's prefer-closest-numa-nodes does) must sum both directions, as the kubelet's
        average distance does (over every ordered pair of the set, KEP-3545).
        """
        if self.distances is not None:
            return self.distances[a][b]
        self.cell(a), self.cell(b)
        return LOCAL_DISTANCE if a == b else REMOTE_DISTANCE

    @property
    def has_default_distances(self) -> bool:
        return all(
            self.distance(a, b) == (LOCAL_DISTANCE if a == b else REMOTE_DISTANCE) for a in self.ids for b in self.ids
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "numa") -> Topology:
        """Build and validate; every error names the field under `where` (e.g. numa.cells[1].cpus)."""
        return cls(*parse_topology(data, where))

    def to_dict(self) -> dict[str, Any]:
        """The inventory form from_dict reads back to an equal Topology."""
        return topology_to_dict(self)
