"""Read NUMA nodes from sysfs: `<sysfs>/devices/system/node`.

Every reader takes where sysfs is mounted (/sys on a host, /host/sys in the DaemonSet, a fake tree in
tests): the one meaning of NUMA_SYSFS_ROOT and of every `--sysfs-root` flag, the plugin's and numalab's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numa_align.cpulist import parse_cpulist

NODE_DIR = "devices/system/node"
"""Where the kernel lists NUMA nodes, relative to the sysfs mount."""
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s+kB", re.MULTILINE)
_HUGEPAGE_DIR = re.compile(r"^hugepages-(\d+)kB$")


class SysfsError(RuntimeError):
    """The tree is missing a file the kernel always writes, or holds something unreadable."""


@dataclass(frozen=True)
class NodeInfo:
    """One NUMA node as the kernel reports it; memory in bytes, hugepages as {page size in KiB: count}."""

    id: int
    cpus: frozenset[int]
    memory: int
    distances: tuple[int, ...] = ()
    hugepages: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        from numa_align.cpulist import format_cpulist

        return {
            "id": self.id,
            "cpus": format_cpulist(self.cpus),
            "memory": self.memory,
            "distances": list(self.distances),
            "hugepages": {f"{size}kB": count for size, count in sorted(self.hugepages.items())},
        }


def node_dir(sysfs: str | Path = "/sys") -> Path:
    """`<sysfs>/devices/system/node` for sysfs mounted at `sysfs`."""
    return Path(sysfs) / NODE_DIR


def online_nodes(sysfs: str | Path = "/sys") -> frozenset[int]:
    """Ids in `node/online`."""
    return _online(node_dir(sysfs))


def read_node(node_id: int, sysfs: str | Path = "/sys") -> NodeInfo:
    return _read_node(node_dir(sysfs), node_id)


def read_nodes(sysfs: str | Path = "/sys") -> list[NodeInfo]:
    """Every online node of the sysfs mounted at `sysfs`, sorted by id."""
    base = node_dir(sysfs)
    return [_read_node(base, node_id) for node_id in sorted(_online(base))]


def _online(base: Path) -> frozenset[int]:
    path = base / "online"
    try:
        return parse_cpulist(_read(path))
    except ValueError as exc:
        raise SysfsError(f"{path}: {exc}") from None


def _read_node(node_base: Path, node_id: int) -> NodeInfo:
    base = node_base / f"node{node_id}"
    try:
        cpus = parse_cpulist(_read(base / "cpulist"))
    except ValueError as exc:
        raise SysfsError(f"{base / 'cpulist'}: {exc}") from None
    meminfo = _read(base / "meminfo")
    match = _MEMTOTAL.search(meminfo)
    if not match:
        raise SysfsError(f"{base / 'meminfo'} has no 'Node {node_id} MemTotal:' line")
    distance_path = base / "distance"
    distances = tuple(int(x) for x in _read(distance_path).split()) if distance_path.exists() else ()
    hugepages: dict[int, int] = {}
    hp_root = base / "hugepages"
    if hp_root.is_dir():
        for entry in sorted(hp_root.iterdir()):
            size = _HUGEPAGE_DIR.match(entry.name)
            if size and (entry / "nr_hugepages").exists():
                hugepages[int(size.group(1))] = int(_read(entry / "nr_hugepages").strip() or 0)
    return NodeInfo(node_id, cpus, int(match.group(1)) * 1024, distances, hugepages)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise SysfsError(f"cannot read {path}: {exc.strerror}") from None
