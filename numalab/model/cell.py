"""One NUMA cell of the model, and the hugepage sizes a cell may hold.

Apart from topology (the whole host) so that topology_data, which reads and validates cells, and topology,
which builds a Topology from what topology_data read, import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from numa_align.cpulist import format_cpulist
from numa_align.hugepages import RESOURCE_PREFIX, is_page_size, size_name

from numalab.model.errors import ValidationError
from numalab.model.quantity import parse_bytes


@dataclass(frozen=True)
class Cell:
    """One NUMA node. cpus: its online CPUs; offline_cpus: CPUs its cpulist names that are offline (after
    `nosmt` or a hot-unplug); memory in bytes, its MemTotal with the hugepages inside (0 for an online node
    with nothing to offer: CXL memory taken offline); hugepages maps a page size as the kubelet names it
    ("64Ki", "2Mi", "1Gi", "16Gi") to a page count."""

    id: int
    cpus: frozenset[int]
    memory: int
    hugepages: Mapping[str, int] = field(default_factory=dict)
    offline_cpus: frozenset[int] = frozenset()

    @property
    def cpulist(self) -> str:
        return format_cpulist(self.cpus)

    @property
    def memory_only(self) -> bool:
        """No online CPU: no pod can get CPUs here, so no CPU-and-memory alignment can pick this cell."""
        return not self.cpus

    def hugepage_bytes(self, size: str) -> int:
        return self.hugepages.get(size, 0) * page_bytes(size, "hugepages")


def page_bytes(size: str, where: str) -> int:
    """Bytes of a hugepage size named as the kubelet does ("2Mi", or the resource form "hugepages-2Mi").

    Any size a kernel can have is taken, not only x86's 2Mi and 1Gi: the kubelet reports and admits every
    `hugepages-<N>kB` the kernel lists (arm64 has 64Ki, 32Mi, 512Mi and 16Gi). A kernel's huge page is its base
    page shifted by an order, so the size is a power of two of at least 1Ki.
    """
    size_bytes = parse_bytes(str(size).removeprefix(RESOURCE_PREFIX), where)
    if not is_page_size(size_bytes):
        raise ValidationError(where, f"hugepage size {size!r} is not one a kernel has: expected a power of two "
                                     "of at least 1Ki, such as 64Ki, 2Mi, 32Mi, 1Gi")
    return size_bytes


def page_name(size: str, where: str) -> str:
    """The kubelet's name of a hugepage size: "2048Ki" and "hugepages-2Mi" -> "2Mi"."""
    return size_name(page_bytes(size, where) // 1024)
