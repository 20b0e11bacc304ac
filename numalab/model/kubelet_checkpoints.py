"""Whether the kubelet's CPU and Memory Manager checkpoints still match the machine, by the kubelet's own rules.

The kubelet (v1.36) refuses to start when cpu_manager_state or memory_manager_state no longer fits the
machine it finds: a CPU taken offline, a NUMA cell's memory or hugepages changed, a file it cannot parse.
Nothing but draining the node and removing the file brings it back, so the deploy plans that reset from
here, and the boot guard (numalab.checkpoint_guard) moves such a file aside before the kubelet starts.
Both call the same functions: this module is pure (no I/O) and imports nothing outside the standard
library but numa-lab's own stdlib-only modules, so the guard ships it in its archive.

The machine is what cadvisor hands the kubelet: online CPUs, and per NUMA node its MemTotal and every
hugepage size its sysfs lists with the page count (sizes with 0 pages included). The checkpoint formats
are the kubelet's structs (pkg/kubelet/cm/{cpu,memory}manager/state/checkpoint.go, PodLevelResourceManagers
off as by default in 1.36), read in numalab.model.kubelet_checkpoint_files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from numa_align.cpulist import format_cpulist

from numalab.model.kubelet_checkpoint_files import UINT64, CheckpointError, read_cpu_checkpoint, read_memory_checkpoint
from numalab.model.quantity import format_bytes

KUBELET_DIR = "/var/lib/kubelet"
CPU_MANAGER_STATE = f"{KUBELET_DIR}/cpu_manager_state"
MEMORY_MANAGER_STATE = f"{KUBELET_DIR}/memory_manager_state"


@dataclass(frozen=True)
class NodeMemory:
    """One NUMA node as cadvisor reports it: MemTotal in bytes, and page size in bytes -> page count."""

    memory: int
    hugepages: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Machine:
    """What the kubelet's managers compare their checkpoints with: the online CPUs and each NUMA node."""

    cpus: frozenset[int]
    nodes: Mapping[int, NodeMemory]

    @classmethod
    def from_sysfs(cls, host: _SysfsHost) -> Machine:
        """From numa-align's sysfs reader (numa_align.sysfs.HostTopology: the deploy's fact, the guard's /sys)."""
        nodes = {node.id: NodeMemory(node.memory, {kib * 1024: count for kib, count in node.hugepages.items()})
                 for node in host.nodes}
        return cls(frozenset(host.cpus), nodes)


class _SysfsNode(Protocol):
    id: int
    memory: int
    hugepages: dict[int, int]


class _SysfsHost(Protocol):
    nodes: tuple[_SysfsNode, ...]
    cpus: Mapping[int, Any]


@dataclass(frozen=True)
class Mismatch:
    """A checkpoint file the kubelet would refuse on this machine, and why in one line."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def checkpoint_mismatches(
    cpu_state: str | None,
    memory_state: str | None,
    machine: Machine,
    *,
    reserved_cpus: Iterable[int] = (),
    strict_cpu_reservation: bool = False,
    reserved_memory: Mapping[int, Mapping[str, int]] | None = None,
) -> list[Mismatch]:
    """The files among cpu_manager_state and memory_manager_state (their text; None when absent) that the
    kubelet would refuse on `machine`. The reservations are the kubelet config's (reservedSystemCPUs,
    strict-cpu-reservation, reservedMemory); reserved_memory None takes each table's own systemReserved,
    which compares the machine only (the guard: the config has not changed since the file was written)."""
    found = [
        cpu_mismatch(cpu_state, machine, reserved_cpus=frozenset(reserved_cpus), strict=strict_cpu_reservation),
        memory_mismatch(memory_state, machine, reserved_memory),
    ]
    return [mismatch for mismatch in found if mismatch is not None]


def cpu_mismatch(
    text: str | None, machine: Machine, *, reserved_cpus: frozenset[int] = frozenset(), strict: bool = False,
    path: str = CPU_MANAGER_STATE,
) -> Mismatch | None:
    """cpumanager staticPolicy.validateState: under policy "static" the default set and the containers' sets
    must not overlap, the reserved CPUs must be in the default set (none of them under strict reservation),
    and their union must equal the CPUs the kubelet's topology has (online CPUs, less the reserved ones under
    strict reservation). An empty default set with no assignment is a fresh state; other policies check none."""
    if text is None:
        return None
    try:
        policy, default, assignments = read_cpu_checkpoint(text)
    except CheckpointError as exc:
        return Mismatch(path, f"the kubelet cannot read it ({exc})")
    if policy != "static":
        return None
    every = machine.cpus - reserved_cpus if strict else machine.cpus
    if not default:
        return Mismatch(path, "its default CPU set is empty but containers hold CPUs") if assignments else None
    if strict and reserved_cpus & default:
        return Mismatch(path, f"strictly reserved CPUs {format_cpulist(reserved_cpus & default)} are in its "
                              f"default set {format_cpulist(default)}")
    if not strict and reserved_cpus - default:
        return Mismatch(path, f"reserved CPUs {format_cpulist(reserved_cpus - default)} are not in its default "
                              f"set {format_cpulist(default)}")
    for (pod, container), cpus in assignments.items():
        if cpus & default:
            return Mismatch(path, f"CPUs {format_cpulist(cpus & default)} of pod {pod} container {container} "
                                  "are also in its default set")
    known = default.union(*assignments.values())
    if known == every:
        return None
    online = "online, less the strictly reserved ones" if strict else "online"
    differs = [f"{what}: {format_cpulist(cpus)}" for what, cpus in
               (("no longer there", known - every), ("not in it", every - known)) if cpus]
    return Mismatch(path, f"it holds CPUs {format_cpulist(known)} but the machine has {format_cpulist(every)} "
                          f"{online} ({'; '.join(differs)})")


def memory_mismatch(
    text: str | None, machine: Machine, reserved: Mapping[int, Mapping[str, int]] | None = None,
    path: str = MEMORY_MANAGER_STATE,
) -> Mismatch | None:
    """memorymanager staticPolicy.validateState: under policy "Static" the checkpoint's machine state must
    equal getDefaultMachineState (per node and resource: total, systemReserved, allocatable = total less the
    reservation, less the node's hugepages for "memory") with the containers' blocks laid over it, as
    areMachineStatesEqual compares them (same nodes, assignment counts, groups; total, systemReserved and
    allocatable per table; free and reserved summed over the node's group). An empty machine state with
    no assignment is a fresh state; policy "None" checks none."""
    if text is None:
        return None
    try:
        policy, state, blocks = read_memory_checkpoint(text)
    except CheckpointError as exc:
        return Mismatch(path, f"the kubelet cannot read it ({exc})")
    if policy != "Static":
        return None
    if not state:
        return Mismatch(path, "its machine state is empty but containers hold memory") if blocks else None
    # The other side of a difference: the machine alone, or (reservation given) the machine under the new
    # configuration, whose reservedMemory may be all that changed (a policy change, not the hardware).
    expected_where = "on the machine" if reserved is None else "expected (this machine, the new reservedMemory)"
    if reserved is None:
        reserved = {node: {name: table["systemReserved"] for name, table in tables["memoryMap"].items()}
                    for node, tables in state.items()}
    expected = default_machine_state(machine, reserved)
    for owner, block in blocks:
        problem = _lay_block(expected, block)
        if problem:
            return Mismatch(path, f"{owner}: {problem}")
    differences = _differences(state, expected, expected_where)
    return Mismatch(path, "; ".join(differences)) if differences else None


def default_machine_state(machine: Machine, reserved: Mapping[int, Mapping[str, int]]) -> dict[int, dict]:
    """memorymanager staticPolicy.getDefaultMachineState, in the checkpoint's JSON field names."""
    state: dict[int, dict] = {}
    for node_id, node in machine.nodes.items():
        kept = reserved.get(node_id, {})
        tables: dict[str, dict[str, int]] = {}
        in_pages = 0
        for size, count in node.hugepages.items():
            total = size * count
            tables[hugepage_resource(size)] = _table(total, kept.get(hugepage_resource(size), 0))
            in_pages += total
        tables["memory"] = _table(node.memory, kept.get("memory", 0), in_pages)
        state[node_id] = {"numberOfAssignments": 0, "memoryMap": tables, "cells": [node_id]}
    return state


def hugepage_resource(size: int) -> str:
    """The kubelet's resource name for a page size in bytes (a binary quantity): 2097152 -> hugepages-2Mi."""
    return f"hugepages-{format_bytes(size)}"


def _table(total: int, reserved: int, in_pages: int = 0) -> dict[str, int]:
    allocatable = (total - reserved - in_pages) % UINT64
    return {"total": total, "systemReserved": reserved, "allocatable": allocatable, "reserved": 0,
            "free": allocatable}


def _lay_block(state: dict[int, dict], block: Mapping[str, Any]) -> str | None:
    """validateState's walk over one assigned block: count it on every node of its affinity and take its size
    from their free memory in order; a node or resource the machine lacks is an error there too."""
    size = block["size"]
    for node_id in block["numaAffinity"]:
        node = state.get(node_id)
        if node is None:
            return f"its memory is on NUMA node {node_id}, which the machine does not have"
        node["numberOfAssignments"] += 1
        node["cells"] = list(block["numaAffinity"])
        table = node["memoryMap"].get(block["type"])
        if table is None:
            return f"its {block['type']} is on NUMA node {node_id}, which has no {block['type']}"
        if size == 0 or table["free"] == 0:
            continue
        taken = min(size, table["free"])
        table["reserved"] += taken
        table["free"] -= taken
        size -= taken
    return None


def _differences(found: Mapping[int, dict], expected: Mapping[int, dict], where: str = "on the machine"
                 ) -> list[str]:
    """areMachineStatesEqual and areMemoryStatesEqual, each difference named by node, resource and field;
    `where` names the expected side's values."""
    out = [f"NUMA node {node} is in it but not on the machine" for node in sorted(found.keys() - expected.keys())]
    out += [f"NUMA node {node} is on the machine but not in it" for node in sorted(expected.keys() - found.keys())]
    for node in sorted(found.keys() & expected.keys()):
        have, want = found[node], expected[node]
        if have["numberOfAssignments"] != want["numberOfAssignments"]:
            out.append(f"NUMA node {node}: {have['numberOfAssignments']} assignments in it, "
                       f"{want['numberOfAssignments']} from its containers")
        if sorted(have["cells"]) != sorted(want["cells"]):
            out.append(f"NUMA node {node}: grouped with {sorted(have['cells'])} in it, {sorted(want['cells'])} "
                       "from its containers")
        names = have["memoryMap"].keys() | want["memoryMap"].keys()
        for name in sorted(names):
            if name not in want["memoryMap"] or name not in have["memoryMap"]:
                where = "in it but not on the machine" if name not in want["memoryMap"] else "on the machine only"
                out.append(f"NUMA node {node} {name}: {where}")
                continue
            field_name = _first_difference(node, name, have, want, found, expected)
            if field_name:
                mine, theirs = field_name
                side = "on the machine" if mine.startswith("total ") else where  # a total is the machine's
                out.append(f"NUMA node {node} {name}: {mine} in it, {theirs} {side}")
    return out


def _first_difference(node: int, name: str, have: dict, want: dict, found: Mapping[int, dict],
                      expected: Mapping[int, dict]) -> tuple[str, str] | None:
    for key in ("total", "systemReserved", "allocatable"):
        if have["memoryMap"][name][key] != want["memoryMap"][name][key]:
            return (f"{key} {_size(have['memoryMap'][name][key])}", _size(want["memoryMap"][name][key]))
    for key in ("free", "reserved"):  # summed over the node's group in the checkpoint, as the kubelet does
        try:
            mine = sum(found[cell]["memoryMap"][name][key] for cell in have["cells"]) % UINT64
            theirs = sum(expected[cell]["memoryMap"][name][key] for cell in have["cells"]) % UINT64
        except KeyError:
            return (f"group {sorted(have['cells'])}", "a node or resource of that group missing")
        if mine != theirs:
            return (f"{key} {_size(mine)} over its group {sorted(have['cells'])}", _size(theirs))
    return None


def _size(value: int) -> str:
    return format_bytes(value) if value < 2**63 else f"{value - UINT64} (below zero)"
