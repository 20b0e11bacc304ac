"""How much of a node the kubelet keeps for itself: kube/system-reserved, eviction thresholds, reserved CPUs
and the per-NUMA-node reserved-memory split the Memory Manager needs to add up exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist

from numalab.model.cell import page_bytes
from numalab.model.errors import ValidationError
from numalab.model.kubelet_settings import EVICTION_SIGNALS, RESERVABLE, KubeletSettings
from numalab.model.quantity import (
    format_bytes,
    format_millis,
    parse_bytes,
    parse_cpu_millis,
)
from numalab.model.topology import Topology


def reservation(raw: Mapping[str, str], where: str) -> dict[str, int]:
    """kube-/system-reserved as exact integers: cpu in millicores, memory kinds in bytes."""
    out: dict[str, int] = {}
    for kind, value in raw.items():
        if kind not in RESERVABLE:
            why = " (hugepages are set aside per NUMA node by the kernel, not by the kubelet)" if kind.startswith(
                "hugepages-") else ""
            raise ValidationError(f"{where}.{kind}", f"the kubelet cannot reserve {kind!r}{why}; it reserves only "
                                  f"{', '.join(RESERVABLE)}")
        if kind == "cpu":
            out[kind] = parse_cpu_millis(value, f"{where}.cpu")
        elif kind == "pid":
            if not str(value).isdigit():
                raise ValidationError(f"{where}.pid", f"expected a whole number of pids, got {value!r}")
            out[kind] = int(value)
        else:
            out[kind] = parse_bytes(value, f"{where}.{kind}")
    return out


def format_reservation(amounts: Mapping[str, int]) -> dict[str, str]:
    """Exact amounts back in the kubelet's spelling (500m, 512Mi), sorted by kind."""

    def show(kind: str, amount: int) -> str:
        if kind == "cpu":
            return format_millis(amount)
        return str(amount) if kind == "pid" else format_bytes(amount)

    return {kind: show(kind, amount) for kind, amount in sorted(amounts.items())}


def eviction_thresholds(raw: Mapping[str, str], memory_policy: str, where: str) -> dict[str, int]:
    """Validate eviction-hard; return the absolute memory thresholds in bytes (memory.available)."""
    out: dict[str, int] = {}
    for signal, value in raw.items():
        if signal not in EVICTION_SIGNALS:
            raise ValidationError(
                f"{where}.{signal}", f"unknown eviction signal (known: {', '.join(EVICTION_SIGNALS)})"
            )
        if value.endswith("%"):
            number = value[:-1]
            try:
                percent = float(number)
            except ValueError:
                raise ValidationError(f"{where}.{signal}", f"{value!r} is not a percentage") from None
            if not 0 < percent <= 100:
                raise ValidationError(f"{where}.{signal}", f"{value!r} must be above 0% and at most 100%")
            if signal == "memory.available" and memory_policy == "Static":
                raise ValidationError(
                    f"{where}.{signal}",
                    f"{value!r}: with memory-manager-policy Static give an absolute quantity (e.g. 100Mi), "
                    "so reserved-memory can be made to add up exactly",
                )
        elif signal == "memory.available":
            out["memory"] = parse_bytes(value, f"{where}.{signal}")
        elif signal == "pid.available":
            if not value.isdigit():
                raise ValidationError(f"{where}.{signal}", f"expected a pid count or percentage, got {value!r}")
        else:
            parse_bytes(value, f"{where}.{signal}")
    return out


def whole_cpus(millis: int) -> int:
    """The CPUs the static CPU manager takes for a kube+system cpu reservation: rounded up, as the kubelet does."""
    return -(-millis // 1000)


def reserved_cpus(topology: Topology, s: KubeletSettings, reserved_millis: int) -> list[int]:
    """reserved-cpus as given, checked against the node; else whole cores of online CPUs, from the lowest cell
    that has CPUs up. Whole cores, because a pinned pod must not share a core with system daemons, and
    under full-pcpus-only a lone reserved thread loses its sibling to both."""
    where = "settings.reserved-cpus"
    if s.reserved_cpus is not None:
        try:
            cpus = parse_cpulist(s.reserved_cpus)
        except CpulistError as exc:
            raise ValidationError(where, str(exc)) from None
        offline = cpus & topology.offline_cpus
        if offline:
            online = format_cpulist(topology.cpus)
            raise ValidationError(where, f"cpu(s) {format_cpulist(offline)} are offline; the kubelet refuses "
                                  f"reserved-cpus that are not a subset of its online CPUs ({online})")
        unknown = cpus - topology.cpus
        if unknown:
            raise ValidationError(
                where, f"cpu(s) {format_cpulist(unknown)} are not on this node (cpus: {format_cpulist(topology.cpus)})"
            )
        if not cpus and s.cpu_manager_policy == "static":
            raise ValidationError(where, "is empty; the static CPU manager needs at least one reserved CPU")
        if cpus == topology.cpus:
            raise ValidationError(where, "reserves every CPU of the node; pods would have none")
        _check_whole_cores(topology, cpus, where)
        return sorted(cpus)
    if s.cpu_manager_policy != "static":
        return []
    if reserved_millis <= 0:
        raise ValidationError(
            "settings.kube-reserved.cpu",
            "the static CPU manager needs kube-reserved cpu + system-reserved cpu > 0, or reserved-cpus",
        )
    count = whole_cpus(reserved_millis)
    chosen: list[int] = []
    for cell in topology.cpu_cells:
        for core in sorted({topology.core_of(cpu) for cpu in cell.cpus}, key=min):
            if len(chosen) >= count:
                break
            chosen.extend(sorted(core))
    if len(chosen) >= len(topology.cpus):
        raise ValidationError(
            "settings.kube-reserved.cpu",
            f"reserving {format_millis(reserved_millis)} CPU takes {len(chosen)} of the node's {len(topology.cpus)} "
            f"online CPUs (whole cores of {topology.threads_per_core} threads) and leaves none for pods",
        )
    return sorted(chosen)


def _check_whole_cores(topology: Topology, cpus: frozenset[int], where: str) -> None:
    whole = frozenset().union(*(topology.core_of(cpu) for cpu in cpus))
    for cpu in sorted(cpus):
        missing = topology.core_of(cpu) - cpus
        if missing:
            raise ValidationError(
                where,
                f"reserves part of a core: cpu {cpu} without its sibling(s) {format_cpulist(missing)}; reserve whole "
                f"cores (here {format_cpulist(whole)}) so no pinned pod shares a core with system daemons",
            )


def _memory_kinds(topology: Topology) -> dict[str, dict[int, int]]:
    """Per memory type, what each cell can hold: regular memory excludes the cell's hugepages."""
    kinds: dict[str, dict[int, int]] = {"memory": {}}
    for cell in (*topology.cpu_cells, *topology.memory_only_cells):  # daemons' memory: CPU cells first
        pages = 0
        for size in cell.hugepages:
            pages += cell.hugepage_bytes(size)
            kinds.setdefault(f"hugepages-{size}", {})[cell.id] = cell.hugepage_bytes(size)
        kinds["memory"][cell.id] = cell.memory - pages
    return kinds


def reserved_memory(
    topology: Topology,
    s: KubeletSettings,
    kube: Mapping[str, int],
    system: Mapping[str, int],
    eviction: Mapping[str, int],
) -> dict[int, dict[str, int]]:
    """Per NUMA node, what the Memory Manager keeps back; under Static it must add up to Node Allocatable's
    reservation exactly (kube + system + eviction memory.available), or the kubelet refuses to start."""
    if s.memory_manager_policy != "Static":
        if s.reserved_memory:
            raise ValidationError("settings.reserved-memory", "only applies with memory-manager-policy Static")
        return {}
    # Node Allocatable never reserves hugepages (kube/system-reserved cannot), so their reserved-memory is 0.
    required = {"memory": kube.get("memory", 0) + system.get("memory", 0) + eviction.get("memory", 0)}
    if required["memory"] <= 0:
        raise ValidationError(
            "settings.kube-reserved.memory",
            "memory-manager-policy Static needs a memory reservation > 0 "
            "(kube-reserved + system-reserved + eviction-hard memory.available)",
        )
    capacity = _memory_kinds(topology)
    if s.reserved_memory is not None:
        split = _explicit_split(topology, s.reserved_memory, capacity)
        _check_sums(split, required)
        return split
    split: dict[int, dict[str, int]] = {}
    for kind, amount in required.items():
        remaining = amount
        for cell_id, room in capacity.get(kind, {}).items():
            take = min(remaining, room)
            if take:
                split.setdefault(cell_id, {})[kind] = take
                remaining -= take
            if not remaining:
                break
        if remaining:
            raise ValidationError(
                "settings.kube-reserved.memory" if kind == "memory" else f"settings.kube-reserved.{kind}",
                f"the reservation of {format_bytes(amount)} {kind} does not fit in the node's cells",
            )
    return dict(sorted(split.items()))


def _explicit_split(
    topology: Topology, raw: Sequence[Mapping[str, Any]], capacity: Mapping[str, Mapping[int, int]]
) -> dict[int, dict[str, int]]:
    split: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(raw):
        where = f"settings.reserved-memory[{i}]"
        if not isinstance(entry, Mapping) or "numa-node" not in entry:
            raise ValidationError(where, "expected {numa-node: N, memory: QUANTITY, ...}")
        node = entry["numa-node"]
        if node not in topology.ids:
            raise ValidationError(
                f"{where}.numa-node", f"NUMA node {node!r} does not exist (nodes: {format_cpulist(topology.ids)})"
            )
        if node in split:
            raise ValidationError(f"{where}.numa-node", f"NUMA node {node} is listed twice")
        split[node] = {}
        for kind, value in entry.items():
            if kind == "numa-node":
                continue
            if kind != "memory":
                if not kind.startswith("hugepages-"):
                    raise ValidationError(f"{where}.{kind}", "expected memory or hugepages-<size>")
                page_bytes(kind, f"{where}.{kind}")
            amount = parse_bytes(value, f"{where}.{kind}")
            room = capacity.get(kind, {}).get(node, 0)
            if amount > room:
                raise ValidationError(
                    f"{where}.{kind}",
                    f"{format_bytes(amount)} exceeds the {format_bytes(room)} of {kind} NUMA node {node} has",
                )
            if amount:
                split[node][kind] = amount
    return dict(sorted((node, kinds) for node, kinds in split.items() if kinds))


def _check_sums(split: Mapping[int, Mapping[str, int]], required: Mapping[str, int]) -> None:
    kinds = set(required) | {kind for kinds in split.values() for kind in kinds}
    for kind in sorted(kinds):
        total = sum(kinds_.get(kind, 0) for kinds_ in split.values())
        want = required.get(kind, 0)
        if total != want:
            raise ValidationError(
                "settings.reserved-memory",
                f"{kind} adds up to {format_bytes(total)} but " + (
                    f"kube-reserved + system-reserved + eviction-hard memory.available is {format_bytes(want)}"
                    if kind == "memory" else
                    "Node Allocatable reserves none of it (kube-reserved and system-reserved cannot reserve hugepages)"
                ) + "; the kubelet refuses to start unless they are equal",
            )
