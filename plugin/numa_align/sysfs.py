"""Read a host's NUMA shape from sysfs: the one reader of numa-align, `numalab kubelet-args` and the deploy.

It reads `<sysfs>/devices/system`: `node/online` (and `possible`), `cpu/online`, each online node's
`cpulist`, `cpuN` entries, `meminfo`, `distance` and `hugepages/`, and each online CPU's
`topology/thread_siblings_list` and `physical_package_id`. Real servers are not uniform: CPUs go offline
(`nosmt`, hot-unplug) and only `cpu/online` says so for sure: an x86 kernel drops an offline CPU from its
node's `cpulist` but keeps the node's `cpuN` link (seen on Linux 6.12), other architectures keep it in the
cpulist; a node's CPUs are the union of both. Nodes may have no CPUs (CXL, HBM, GPU memory) and even no
memory (CXL memory taken offline: MemTotal 0 kB), ids are sparse (up to 1023), cores carry 2 or 4 threads,
hugepages come in whatever sizes the architecture has, and distance tables may be asymmetric.

The files come from a mounted tree (`SysfsTree`: /sys on a host, /host/sys in the DaemonSet, a fake tree
in tests) or from a dump a remote host printed (`SysfsDump`, the deploy's fact); both go through
`read_host`, so the plugin, the CLI and the deploy cannot disagree. A file that cannot be read or parsed
is a SysfsError naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from numa_align.cpulist import format_cpulist, parse_cpulist
from numa_align.sysfs_sources import DUMP_COMMAND, SYSTEM_DIR, Source, SysfsDump, SysfsError, SysfsTree

__all__ = ["DUMP_COMMAND", "CpuInfo", "HostTopology", "NodeInfo", "Source", "SysfsDump", "SysfsError", "SysfsTree",
           "node_dir", "read_host", "read_nodes", "read_sysfs"]

NODE_DIR = f"{SYSTEM_DIR}/node"
"""Where the kernel lists NUMA nodes, relative to the sysfs mount."""
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s+kB", re.MULTILINE)
_HUGEPAGE_DIR = re.compile(r"^hugepages-(\d+)kB$")


@dataclass(frozen=True)
class NodeInfo:
    """One online NUMA node. cpus: its online CPUs; offline_cpus: CPUs its cpulist lists that are offline;
    memory in bytes (MemTotal, hugepages inside; 0 on a node whose memory was taken offline); hugepages as
    {page size in KiB: count}, every size the kernel lists; distances from this node to every online node in
    id order, this node's row as the kernel gives it (not necessarily equal to its column: ACPI's SLIT allows
    asymmetric tables)."""

    id: int
    cpus: frozenset[int]
    memory: int
    distances: tuple[int, ...] = ()
    hugepages: dict[int, int] = field(default_factory=dict)
    offline_cpus: frozenset[int] = frozenset()

    @property
    def memory_only(self) -> bool:
        """No online CPU: a CXL expander, HBM in flat mode, GPU memory, or a node whose CPUs are all offline."""
        return not self.cpus

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "cpus": format_cpulist(self.cpus),
            "offline_cpus": format_cpulist(self.offline_cpus),
            "memory_only": self.memory_only,
            "memory": self.memory,
            "distances": list(self.distances),
            "hugepages": {f"{size}kB": count for size, count in sorted(self.hugepages.items())},
        }


@dataclass(frozen=True)
class CpuInfo:
    """One online CPU: its core is the set of its online thread siblings (itself included)."""

    id: int
    node: int
    core: frozenset[int]
    package: int


@dataclass(frozen=True)
class HostTopology:
    """What sysfs says of a host: its online nodes in id order, its online CPUs, the nodes possible but offline."""

    nodes: tuple[NodeInfo, ...]
    cpus: Mapping[int, CpuInfo]
    offline_nodes: frozenset[int] = frozenset()

    @property
    def cpu_nodes(self) -> tuple[NodeInfo, ...]:
        """Nodes with at least one online CPU: the only ones a pod can get CPUs and memory from together."""
        return tuple(node for node in self.nodes if node.cpus)

    @property
    def memory_only_nodes(self) -> tuple[NodeInfo, ...]:
        return tuple(node for node in self.nodes if not node.cpus)

    @property
    def offline_cpus(self) -> frozenset[int]:
        return frozenset().union(*(node.offline_cpus for node in self.nodes))

    @property
    def threads_per_core(self) -> int:
        """The most threads any core has online (1 without SMT or with `nosmt`)."""
        return max((len(cpu.core) for cpu in self.cpus.values()), default=1)


def read_host(source: Source) -> HostTopology:
    """Every online node and online CPU of `source`; SysfsError naming the file on anything unreadable."""
    online = _cpulist(source, "node/online")
    possible = _cpulist(source, "node/possible", required=False)
    cpu_online = _cpulist(source, "cpu/online")
    nodes: list[NodeInfo] = []
    cpus: dict[int, CpuInfo] = {}
    owner: dict[int, int] = {}
    for node_id in sorted(online):
        listed = _cpulist(source, f"node/node{node_id}/cpulist") | _cpu_entries(source, node_id)
        for cpu in sorted(listed):
            if cpu in owner:
                raise SysfsError(
                    f"{source.name(f'node/node{node_id}/cpulist')}: cpu {cpu} is also in node {owner[cpu]}")
            owner[cpu] = node_id
        nodes.append(NodeInfo(
            id=node_id,
            cpus=listed & cpu_online,
            memory=_memtotal(source, node_id),
            distances=_distances(source, node_id, online, possible),
            hugepages=_hugepages(source, node_id),
            offline_cpus=listed - cpu_online,
        ))
    for cpu in sorted(cpu_online & owner.keys()):
        base = f"cpu/cpu{cpu}/topology"
        siblings = _cpulist(source, f"{base}/thread_siblings_list") & cpu_online
        if cpu not in siblings:
            raise SysfsError(f"{source.name(f'{base}/thread_siblings_list')} does not list cpu {cpu} itself")
        cpus[cpu] = CpuInfo(cpu, owner[cpu], siblings, _integer(source, f"{base}/physical_package_id"))
    stray = cpu_online - owner.keys()
    if stray:
        raise SysfsError(f"{source.name('cpu/online')}: cpu(s) {format_cpulist(stray)} are online but in no "
                         f"online node's cpulist (nodes: {format_cpulist(online)})")
    return HostTopology(tuple(nodes), dict(sorted(cpus.items())), frozenset(possible - online))


def read_sysfs(sysfs: str | Path = "/sys") -> HostTopology:
    """read_host of the sysfs mounted at `sysfs` (the mount point, as NUMA_SYSFS_ROOT and --sysfs-root)."""
    return read_host(SysfsTree(sysfs))


def read_nodes(sysfs: str | Path = "/sys") -> list[NodeInfo]:
    """Every online node of the sysfs mounted at `sysfs`, sorted by id."""
    return list(read_sysfs(sysfs).nodes)


def node_dir(sysfs: str | Path = "/sys") -> Path:
    """`<sysfs>/devices/system/node` for sysfs mounted at `sysfs`."""
    return Path(sysfs) / NODE_DIR


def _text(source: Source, path: str, required: bool = True) -> str | None:
    text = source.read(path)
    if text is None and required:
        raise SysfsError(f"{source.name(path)} does not exist")
    return text


def _cpulist(source: Source, path: str, required: bool = True) -> frozenset[int]:
    text = _text(source, path, required)
    if text is None:
        return frozenset()
    try:
        return parse_cpulist(text)
    except ValueError as exc:
        raise SysfsError(f"{source.name(path)}: {exc}") from None


def _cpu_entries(source: Source, node_id: int) -> frozenset[int]:
    """The node's `cpuN` entries: offline CPUs keep theirs where the cpulist drops them (x86)."""
    return frozenset(int(name[3:]) for name in source.children(f"node/node{node_id}")
                     if name.startswith("cpu") and name[3:].isdigit())


def _integer(source: Source, path: str) -> int:
    text = (_text(source, path) or "").strip()
    if not text.lstrip("-").isdigit():
        raise SysfsError(f"{source.name(path)}: expected a whole number, got {text!r}")
    return int(text)


def _memtotal(source: Source, node_id: int) -> int:
    path = f"node/node{node_id}/meminfo"
    match = _MEMTOTAL.search(_text(source, path) or "")
    if not match:
        raise SysfsError(f"{source.name(path)} has no 'Node {node_id} MemTotal:' line")
    return int(match.group(1)) * 1024


def _distances(source: Source, node_id: int, online: frozenset[int], possible: frozenset[int]) -> tuple[int, ...]:
    """The node's row of the distance table, one entry per online node in id order.

    The kernel writes one column per online node (drivers/base/node.c: for_each_online_node), but some kernels
    and captured trees write one per possible node: the columns are the possible ids then, and those of offline
    nodes are dropped. The row is kept as the firmware gave it: ACPI's SLIT may make d(i,j) differ from d(j,i).
    """
    path = f"node/node{node_id}/distance"
    text = _text(source, path) or ""
    try:
        row = tuple(int(word) for word in text.split())
    except ValueError:
        raise SysfsError(f"{source.name(path)}: expected whole numbers, got {text.strip()!r}") from None
    if len(row) == len(online):
        return row
    if online <= possible and len(row) == len(possible):
        by_id = dict(zip(sorted(possible), row, strict=True))
        return tuple(by_id[other] for other in sorted(online))
    raise SysfsError(
        f"{source.name(path)}: {len(row)} distances, but there are {len(online)} online nodes "
        f"({format_cpulist(online)}, node/online) and {len(possible)} possible ones "
        f"({format_cpulist(possible) or 'no node/possible'}); expected one per online or per possible node")


def _hugepages(source: Source, node_id: int) -> dict[int, int]:
    pages: dict[int, int] = {}
    base = f"node/node{node_id}/hugepages"
    for name in source.children(base):
        size = _HUGEPAGE_DIR.match(name)
        path = f"{base}/{name}/nr_hugepages"
        if size and source.read(path) is not None:
            pages[int(size.group(1))] = _integer(source, path)
    return pages
