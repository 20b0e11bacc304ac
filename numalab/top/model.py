"""Per-node views: NRT zones joined with the pods that hold them, the Nodes and the Pods the API lists.

Pure: the inputs are the API's objects as dicts, so tests build them by hand. The NRT carries only counts,
so which CPU ids sit in which cell comes from each allocation's `numa_nodes`; a pod spanning several cells
has its ids split over them in order of the room each cell's count leaves (a guess, shown as such).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from numa_align.cpulist import format_cpulist
from numa_align.devices import node_of_resource

from numalab.top.audit import AuditSummary
from numalab.top.liveness import leases_by_name, stale_since
from numalab.top.nrt import Allocation, Amount, ParsedNrt, Zone, parse_nrt

HUGEPAGES_PREFIX = "hugepages-"
NO_NRT = "no NodeResourceTopology: numa-align is not publishing here (numa_align_nrt off?)"


@dataclass(frozen=True)
class CellHold:
    """One pod's share of one cell. spans: the pod's NUMA nodes when it has several (CPU split guessed)."""

    pod: str
    cpus: tuple[int, ...] = ()
    memory: int = 0
    devices: Mapping[str, int] = field(default_factory=dict)
    spans: tuple[int, ...] = ()


@dataclass(frozen=True)
class Square:
    """One CPU of a cell picture: state is reserved, held (pod and cpu id known), unknown (held, pod not
    published) or free."""

    state: str
    pod: str | None = None
    cpu: int | None = None


@dataclass(frozen=True)
class CellView:
    zone: str
    numa_id: int | None
    cpu: Amount | None
    memory: Amount | None
    hugepages: Mapping[str, Amount]
    devices: Mapping[str, Amount]
    costs: Mapping[str, int]
    holds: tuple[CellHold, ...]

    @property
    def memory_only(self) -> bool:
        """Memory and no CPU (CXL, HBM): pods can only reach it as remote memory."""
        return self.memory is not None and (self.cpu is None or self.cpu.capacity == 0)

    def squares(self) -> list[Square]:
        """reserved, then each pod's CPUs (ids when known), then held-by-unknown, then free: capacity squares."""
        if self.cpu is None:
            return []
        allocatable = self.cpu.allocatable
        held = [Square("held", h.pod, cpu) for h in self.holds for cpu in h.cpus][:allocatable]
        unknown = min(max(0, self.cpu.used - len(held)), allocatable - len(held))
        free = allocatable - len(held) - unknown
        return ([Square("reserved")] * self.cpu.reserved + held + [Square("unknown")] * unknown
                + [Square("free")] * free)

    def memory_segments(self) -> list[tuple[str, str | None, int]]:
        """(state, pod, bytes) in the order the memory bar draws them; they add up to the capacity."""
        if self.memory is None:
            return []
        held = [("held", h.pod, h.memory) for h in self.holds if h.memory]
        attributed = sum(size for _, _, size in held)
        unknown = max(0, self.memory.used - attributed)
        free = max(0, self.memory.allocatable - attributed - unknown)
        segments = [("reserved", None, self.memory.reserved), *held, ("unknown", None, unknown), ("free", None, free)]
        return [segment for segment in segments if segment[2] > 0]


@dataclass(frozen=True)
class PodHold:
    """An allocation entry with what the API says of its pod; phase/qos are None when the pod is gone."""

    allocation: Allocation
    exists: bool
    phase: str | None = None
    qos: str | None = None


@dataclass(frozen=True)
class NodeView:
    name: str
    node_exists: bool
    has_nrt: bool
    attributes: Mapping[str, str] = field(default_factory=dict)
    allocations_published: bool = False
    cells: tuple[CellView, ...] = ()
    pods: tuple[PodHold, ...] = ()
    warnings: tuple[str, ...] = ()
    stale: str | None = None
    """Why numa-align no longer vouches for the object (top.liveness); None when it does or is not known."""
    audit: AuditSummary | None = None

    @property
    def policy(self) -> str | None:
        return self.attributes.get("topologyManagerPolicy") or self.attributes.get("topologyPolicies")

    @property
    def scope(self) -> str | None:
        return self.attributes.get("topologyManagerScope")


def pod_key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '')}"


def build_views(nrts: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
                pods: Iterable[Mapping[str, Any]], only: str | None = None,
                leases: Iterable[Mapping[str, Any]] | None = None,
                now: datetime.datetime | None = None) -> list[NodeView]:
    """One view per node that has a Node or an NRT object (or both), sorted by name; `only` keeps one. With
    `leases` (numa-align's, None when they could not be read) and `now`, an object whose Lease expired or is
    absent is marked stale."""
    node_objects = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    parsed: dict[str, ParsedNrt] = {}
    duplicates: dict[str, list[str]] = {}
    for obj in nrts:
        nrt = parse_nrt(obj)
        if nrt.node in parsed:
            duplicates.setdefault(nrt.node, []).append(nrt.name)
            continue
        parsed[nrt.node] = nrt
    pods_by_key = {pod_key(p): p for p in pods}
    by_name = leases_by_name(leases or [])
    views = []
    for name in sorted(set(node_objects) | set(parsed)):
        if only is not None and name != only:
            continue
        if name not in parsed:
            views.append(NodeView(name, True, False, warnings=(_no_nrt(node_objects[name]),)))
            continue
        view = node_view(parsed[name], name in node_objects, pods_by_key)
        stale = None if leases is None or now is None else stale_since(name, by_name, now)
        if stale:  # first among the warnings, so every rendering shows it
            view = replace(view, stale=stale, warnings=(stale, *view.warnings))
        if name in duplicates:
            others = ", ".join(duplicates[name])
            view = _with_warning(view, f"more NodeResourceTopology objects name this node: {others} "
                                       f"(shown: {parsed[name].name})")
        views.append(view)
    return views


def node_view(nrt: ParsedNrt, node_exists: bool, pods: Mapping[str, Mapping[str, Any]]) -> NodeView:
    """The view of one NRT object: its cells with their holds, its pods judged against the API's."""
    warnings = list(nrt.warnings)
    if not node_exists:
        warnings.insert(0, f"stale NodeResourceTopology {nrt.name}: node {nrt.node} no longer exists")
    allocations = nrt.allocations or {}
    holds = _place(nrt.zones, allocations, warnings)
    cells = tuple(_cell(zone, holds.get(zone.name, {})) for zone in nrt.zones)
    judged = []
    for key in sorted(allocations):
        pod = pods.get(key)
        on_node = pod is not None and (pod.get("spec") or {}).get("nodeName") == nrt.node
        if pod is None:
            warnings.append(f"allocation of {key}: no such pod on {nrt.node} (stale entry: the pod is gone)")
        elif not on_node:
            warnings.append(f"allocation of {key}: the pod runs on {(pod.get('spec') or {}).get('nodeName')}, "
                            f"not {nrt.node} (stale entry)")
        status = (pod or {}).get("status") or {}
        judged.append(PodHold(allocations[key], on_node, status.get("phase") if on_node else None,
                              status.get("qosClass") if on_node else None))
    return NodeView(nrt.node, node_exists, True, nrt.attributes, nrt.allocations is not None, cells,
                    tuple(judged), tuple(warnings), audit=nrt.audit)


def _no_nrt(node: Mapping[str, Any]) -> str:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    if any(node_of_resource(str(name)) is not None for name in allocatable):
        return NO_NRT
    return NO_NRT + "; the node advertises no numa-align/numa-N either"


def _with_warning(view: NodeView, warning: str) -> NodeView:
    return replace(view, warnings=(*view.warnings, warning))


def _cell(zone: Zone, holds: Mapping[str, dict[str, Any]]) -> CellView:
    hugepages = {name.removeprefix(HUGEPAGES_PREFIX): amount for name, amount in zone.resources.items()
                 if name.startswith(HUGEPAGES_PREFIX)}
    devices = {name: amount for name, amount in zone.resources.items()
               if name not in ("cpu", "memory") and not name.startswith(HUGEPAGES_PREFIX)}
    cell_holds = tuple(CellHold(pod, tuple(h["cpus"]), h["memory"], dict(h["devices"]), h["spans"])
                       for pod, h in sorted(holds.items()))
    return CellView(zone.name, zone.numa_id, zone.resources.get("cpu"), zone.resources.get("memory"),
                    hugepages, devices, zone.costs, cell_holds)


def _place(zones: tuple[Zone, ...], allocations: Mapping[str, Allocation],
           warnings: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """zone name -> pod -> {cpus, memory, devices, spans}: each allocation cut into its cells."""
    by_id = {zone.numa_id: zone for zone in zones if zone.numa_id is not None}
    with_cpus = [zone for zone in zones if "cpu" in zone.resources and zone.resources["cpu"].capacity > 0]
    placed: dict[str, dict[str, dict[str, Any]]] = {}

    def share(zone: Zone, alloc: Allocation) -> dict[str, Any]:
        spans = alloc.numa_nodes if len(alloc.numa_nodes) > 1 else ()
        return placed.setdefault(zone.name, {}).setdefault(
            alloc.pod, {"cpus": [], "memory": 0, "devices": {}, "spans": spans})

    spanning = []
    for pod in sorted(allocations):
        alloc = allocations[pod]
        missing = [n for n in alloc.numa_nodes if n not in by_id]
        if missing:
            warnings.append(f"allocation of {pod}: NUMA node {', '.join(map(str, missing))} has no zone here")
        for numa_id, size in alloc.memory.items():
            if numa_id in by_id:
                share(by_id[numa_id], alloc)["memory"] += size
        for name, count in alloc.devices.items():
            zone = _device_zone(name, zones, by_id, alloc)
            if zone is not None:
                devices = share(zone, alloc)["devices"]
                devices[name] = devices.get(name, 0) + count
        cells = [by_id[n] for n in alloc.numa_nodes if n in by_id and by_id[n] in with_cpus]
        if not alloc.cpus:
            continue
        if not cells and len(with_cpus) == 1 and not alloc.numa_nodes:
            cells = with_cpus
        if not cells:
            warnings.append(f"allocation of {pod}: CPUs {format_cpulist(alloc.cpus)} name no NUMA node with CPUs here; "
                            "not drawn in a cell")
        elif len(cells) == 1:
            share(cells[0], alloc)["cpus"].extend(alloc.cpus)
        else:
            spanning.append((alloc, cells))
    for alloc, cells in spanning:  # after the single-cell pods, whose places are certain
        remaining = list(alloc.cpus)
        for i, zone in enumerate(cells):
            taken = sum(len(h["cpus"]) for h in placed.get(zone.name, {}).values())
            room = max(0, zone.resources["cpu"].used - taken)
            count = len(remaining) if i == len(cells) - 1 else min(room, len(remaining))
            if count:
                share(zone, alloc)["cpus"].extend(remaining[:count])
            remaining = remaining[count:]
    return placed


def _device_zone(name: str, zones: tuple[Zone, ...], by_id: Mapping[int, Zone], alloc: Allocation) -> Zone | None:
    """numa-align/numa-N goes to zone N; another device to the one zone that lists it, else the pod's first."""
    if (node := node_of_resource(name)) is not None:
        return by_id.get(node)
    listing = [zone for zone in zones if name in zone.resources]
    if len(listing) == 1:
        return listing[0]
    return next((by_id[n] for n in alloc.numa_nodes if n in by_id), None)

