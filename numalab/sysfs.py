"""Topology of a real (or fake) host from sysfs: the one I/O edge of the model.

numa-align's reader (numa_align.sysfs.read_host) reads the files, here or from a host's dump (the deploy's
NumaSysfs fact); this module only turns what it read into a validated Topology. Every hugepage size the kernel
lists is kept, named as the kubelet names it (numa_align.hugepages), as numa-align's NRT names it.
"""

from __future__ import annotations

from pathlib import Path

from numa_align.hugepages import size_name
from numa_align.sysfs import HostTopology, SysfsError, node_dir, read_sysfs

from numalab.model.errors import ValidationError
from numalab.model.topology import Topology


def topology_from_sysfs(sysfs: str | Path = "/sys") -> Topology:
    """Read `<sysfs>/devices/system` of sysfs mounted at `sysfs` into a validated Topology.

    `sysfs` means what numa-align's NUMA_SYSFS_ROOT means: the mount point (/sys), not the file system root.
    """
    try:
        host = read_sysfs(sysfs)
    except SysfsError as exc:
        raise ValidationError("sysfs", str(exc)) from None
    return topology_from_host(host, where=f"sysfs {node_dir(sysfs)}")


def topology_from_host(host: HostTopology, where: str) -> Topology:
    """What numa-align's reader gives (from a local tree or a host's fact) as a validated Topology."""
    cells = []
    for node in host.nodes:
        cell: dict = {"id": node.id, "cpus": sorted(node.cpus | node.offline_cpus), "memory": node.memory}
        if node.offline_cpus:
            cell["offline_cpus"] = sorted(node.offline_cpus)
        pages = {size_name(size): count for size, count in sorted(node.hugepages.items())}
        if pages:
            cell["hugepages"] = pages
        cells.append(cell)
    data: dict = {"cells": cells}
    if host.nodes and all(len(node.distances) == len(host.nodes) for node in host.nodes):
        data["distances"] = [list(node.distances) for node in host.nodes]
    if host.cpus:
        data["cores"] = sorted({tuple(sorted(cpu.core)) for cpu in host.cpus.values()})
        packages: dict[int, list[int]] = {}
        for cpu in host.cpus.values():
            packages.setdefault(cpu.package, []).append(cpu.id)
        data["packages"] = packages
    return Topology.from_dict(data, where=where)
