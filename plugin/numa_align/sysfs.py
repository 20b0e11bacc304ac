"""Read NUMA nodes from a sysfs tree (`<root>/sys/devices/system/node`).

The root is a parameter so tests and `numalab kubelet-args --sysfs-root` can use fake trees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from numa_align.cpulist import parse_cpulist

NODE_DIR = "sys/devices/system/node"
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


def node_dir(root: str | Path = "/") -> Path:
    return Path(root) / NODE_DIR


def online_nodes(root: str | Path = "/") -> frozenset[int]:
    """Ids in `node/online`."""
    return _online(node_dir(root))


def read_node(node_id: int, root: str | Path = "/") -> NodeInfo:
    return _read_node(node_dir(root), node_id)


def read_nodes(root: str | Path = "/") -> list[NodeInfo]:
    """Every online node, sorted by id."""
    return _read_nodes(node_dir(root))


def read_mounted_nodes(sysfs: str | Path = "/sys") -> list[NodeInfo]:
    """Every online node of a sysfs mounted at `sysfs`, sorted by id.

    The plugin is told where sysfs is mounted (NUMA_SYSFS_ROOT, /sys or /host/sys in a container),
    not where the root of the file system is, which is what `read_nodes` takes.
    """
    return _read_nodes(Path(sysfs) / "devices/system/node")


def _online(base: Path) -> frozenset[int]:
    path = base / "online"
    try:
        return parse_cpulist(_read(path))
    except ValueError as exc:
        raise SysfsError(f"{path}: {exc}") from None


def _read_nodes(base: Path) -> list[NodeInfo]:
    return [_read_node(base, node_id) for node_id in sorted(_online(base))]


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
