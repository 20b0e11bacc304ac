"""A lab guest's NUMA shape, checked for what QEMU/libvirt and the guest can really emulate.

vCPUs are every cell's cpus, offline ones included (QEMU creates them; the guest's first-boot unit takes
`offline_cpus` offline at every boot, as `nosmt` or a hot-unplug would). `threads_per_core` becomes the
domain's `<topology threads>` (QEMU numbers a core's threads consecutively); a cell without cpus is a
memory-only node (libvirt's `<cell>` without `cpus`, as CXL or GPU memory looks to a kernel); a cell's
hugepages are reserved on that node by the same first-boot unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.errors import ValidationError
from numalab.model.quantity import format_bytes, parse_bytes
from numalab.model.topology import Topology

MIB = 1024 * 1024
PAGE_KIB = {"2Mi": 2048, "1Gi": 1048576}


def guest_vcpus(topology: Topology) -> frozenset[int]:
    """Every vCPU the domain has: online and offline cpus of every cell."""
    return topology.cpus | topology.offline_cpus


def domain_cells(topology: Topology) -> list[dict[str, Any]]:
    return [{"id": cell.id, "vcpus": format_cpulist(cell.cpus | cell.offline_cpus), "memory_kib": cell.memory // 1024}
            for cell in topology.cells]


def cpu_topology(topology: Topology) -> tuple[int, int, int]:
    """(sockets, cores, threads) consistent with the cells: one socket per CPU cell when every such cell
    holds the same number of consecutive vCPUs in cell order; otherwise one socket holding all of them."""
    threads = topology.threads_per_core if topology.cores is not None else 1
    vcpus = len(guest_vcpus(topology))
    cells = [cell.cpus | cell.offline_cpus for cell in topology.cells if cell.cpus | cell.offline_cpus]
    per_cell = len(cells[0])
    start = 0
    for cpus in cells:
        if cpus != frozenset(range(start, start + per_cell)):
            return (1, vcpus // threads, threads)
        start += per_cell
    return (len(cells), per_cell // threads, threads)


def guest_topology(name: str, raw: Mapping[str, Any]) -> Topology:
    """The guest's `numa` (or `vcpus` + `memory` for one cell), checked; errors name `<guest>.<field>`."""
    if "numa" in raw:
        numa = raw["numa"]
        if isinstance(numa, Mapping) and "cores" in numa:
            raise ValidationError(f"{name}.numa.cores", "lab guests take threads_per_core: QEMU numbers a core's "
                                  "threads consecutively, so other sibling layouts cannot be emulated")
        topology = Topology.from_dict(numa, where=f"{name}.numa")
    elif "vcpus" in raw and "memory" in raw:
        vcpus = _vcpus(name, raw["vcpus"])
        cpus = f"0-{vcpus - 1}" if vcpus > 1 else "0"
        topology = Topology.from_dict(
            {"cells": [{"id": 0, "cpus": cpus, "memory": raw["memory"]}]}, where=f"{name}.numa"
        )
    else:
        raise ValidationError(f"{name}.numa", "give numa cells, or vcpus and memory for a single-cell guest")
    all_cpus = guest_vcpus(topology)
    if "vcpus" in raw:
        vcpus = _vcpus(name, raw["vcpus"])
        if vcpus != len(all_cpus):
            raise ValidationError(
                f"{name}.vcpus", f"{vcpus} vCPUs but the cells hold {len(all_cpus)} cpus ({sorted(all_cpus)})"
            )
    if all_cpus != frozenset(range(len(all_cpus))):
        raise ValidationError(
            f"{name}.numa.cells",
            f"cell cpus must be exactly vCPUs 0-{len(all_cpus) - 1}, none missing; got {sorted(all_cpus)}",
        )
    if 0 in topology.offline_cpus:
        raise ValidationError(f"{name}.numa.cells", "vCPU 0 cannot be taken offline in the guest (the boot CPU)")
    if topology.ids != tuple(range(len(topology.cells))):
        raise ValidationError(f"{name}.numa.cells", f"libvirt numbers cells 0-{len(topology.cells) - 1} in order; "
                              f"got ids {list(topology.ids)}")
    _check_threads(name, topology)
    if "memory" in raw:
        memory = parse_bytes(raw["memory"], f"{name}.memory")
        if memory != topology.memory:
            raise ValidationError(
                f"{name}.memory",
                f"{format_bytes(memory)} but the cells add up to {format_bytes(topology.memory)}",
            )
    for cell in topology.cells:
        if cell.memory % MIB or not cell.memory:
            raise ValidationError(f"{name}.numa.cells", f"cell {cell.id} memory must be whole MiB, and not 0")
        other = sorted(size for size, count in cell.hugepages.items() if count and size not in PAGE_KIB)
        if other:
            raise ValidationError(f"{name}.numa.cells", f"cell {cell.id} hugepages {', '.join(other)}: an x86 guest "
                                  f"has only {' and '.join(PAGE_KIB)} pages (the model takes any size a kernel has)")
    return topology


def boot_shape(topology: Topology) -> str:
    """What the guest's first-boot unit applies at every boot, as shell variables: the vCPUs to take offline
    and `node:page KiB:count` hugepage reservations."""
    offline = " ".join(str(cpu) for cpu in sorted(topology.offline_cpus))
    pages = " ".join(f"{cell.id}:{PAGE_KIB[size]}:{count}" for cell in topology.cells
                     for size, count in sorted(cell.hugepages.items()) if count)
    return f'OFFLINE_CPUS="{offline}"\nHUGEPAGES="{pages}"\n'


def _check_threads(name: str, topology: Topology) -> None:
    if topology.cores is None:
        return
    threads = topology.threads_per_core
    for cell in topology.cells:
        listed = len(cell.cpus | cell.offline_cpus)
        if listed % threads:
            raise ValidationError(f"{name}.numa.threads_per_core",
                                  f"cell {cell.id} holds {listed} vCPUs, not whole cores of {threads} threads")


def _vcpus(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name}.vcpus", f"expected a vCPU count ≥ 1, got {value!r}")
    return value
