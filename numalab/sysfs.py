"""Topology of a real (or fake) host from sysfs: the one I/O edge of the model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from numa_align.sysfs import NodeInfo, SysfsError, node_dir, read_nodes

from numalab.model.errors import ValidationError
from numalab.model.topology import Topology

_PAGE_NAMES = {2048: "2Mi", 1048576: "1Gi"}


def topology_from_sysfs(sysfs: str | Path = "/sys") -> Topology:
    """Read `<sysfs>/devices/system/node` of sysfs mounted at `sysfs` into a validated Topology.

    `sysfs` means what numa-align's NUMA_SYSFS_ROOT means: the mount point (/sys), not the file system root.
    """
    try:
        nodes = read_nodes(sysfs)
    except SysfsError as exc:
        raise ValidationError("sysfs", str(exc)) from None
    return topology_from_nodes(nodes, where=f"sysfs {node_dir(sysfs)}")


def topology_from_nodes(nodes: Sequence[NodeInfo], where: str) -> Topology:
    """numa-align's NodeInfo list (from a local tree or a host's fact) as a validated Topology."""
    cells = []
    for node in nodes:
        cell = {"id": node.id, "cpus": sorted(node.cpus), "memory": node.memory}
        pages = {_PAGE_NAMES[size]: count for size, count in node.hugepages.items() if size in _PAGE_NAMES}
        if pages:
            cell["hugepages"] = pages
        cells.append(cell)
    data: dict = {"cells": cells}
    if all(len(node.distances) == len(nodes) for node in nodes):
        data["distances"] = [list(node.distances) for node in nodes]
    return Topology.from_dict(data, where=where)
