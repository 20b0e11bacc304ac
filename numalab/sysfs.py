"""Topology of a real (or fake) host from its sysfs tree: the one I/O edge of the model."""

from __future__ import annotations

from pathlib import Path

from numa_align.sysfs import SysfsError, read_nodes

from numalab.model.errors import ValidationError
from numalab.model.topology import Topology

_PAGE_NAMES = {2048: "2Mi", 1048576: "1Gi"}


def topology_from_sysfs(root: str | Path = "/") -> Topology:
    """Read `<root>/sys/devices/system/node` into a validated Topology."""
    try:
        nodes = read_nodes(root)
    except SysfsError as exc:
        raise ValidationError("sysfs", str(exc)) from None
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
    return Topology.from_dict(data, where=f"sysfs {Path(root) / 'sys/devices/system/node'}")
