"""One NodeResourceTopology object, parsed: its zones, attributes and numa-align's allocations annotation.

Lenient on purpose: a value that is not a Kubernetes quantity, or an annotation that is not the JSON
expected, becomes a warning and is left out, so an object from a newer or half-done publisher still shows
what can be read instead of hiding the whole node.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.cpulist import CpulistError, parse_cpulist
from numa_align.nrt_api import ALLOCATIONS_ANNOTATION

from numalab.model.errors import ValidationError
from numalab.model.quantity import parse_quantity
from numalab.top.audit import AuditSummary, parse_audit

_ZONE_NAME = re.compile(r"^node-(\d+)$")


@dataclass(frozen=True)
class Amount:
    """One resource of one zone in whole units: CPUs, bytes or devices."""

    capacity: int
    allocatable: int
    available: int

    @property
    def used(self) -> int:
        """Held exclusively by pods (allocatable − available): what the scheduler can no longer give."""
        return max(0, self.allocatable - self.available)

    @property
    def reserved(self) -> int:
        """Kept from pods by the kubelet (reserved CPUs, reserved memory): capacity − allocatable."""
        return max(0, self.capacity - self.allocatable)

    def as_dict(self) -> dict[str, int]:
        return {"capacity": self.capacity, "allocatable": self.allocatable, "available": self.available,
                "used": self.used}


@dataclass(frozen=True)
class Zone:
    """A zone of type Node: one NUMA node. numa_id is N of `node-N` (None for another name)."""

    name: str
    numa_id: int | None
    resources: Mapping[str, Amount]
    costs: Mapping[str, int]
    attributes: Mapping[str, str] = field(default_factory=dict)
    """The zone's own attributes as published (numa-align's whole-core counts: numa_align.nrt_cores)."""


@dataclass(frozen=True)
class Allocation:
    """One pod's entry in the allocations annotation; cpus are real CPU ids, memory is bytes per NUMA id."""

    pod: str
    cpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    memory: Mapping[int, int]
    devices: Mapping[str, int]


@dataclass(frozen=True)
class ParsedNrt:
    """What `top` needs of one object. allocations is None when the annotation is absent or unreadable."""

    name: str
    node: str
    zones: tuple[Zone, ...]
    attributes: Mapping[str, str]
    allocations: Mapping[str, Allocation] | None
    warnings: tuple[str, ...]
    audit: AuditSummary | None = None
    """numa-align's cpuset audit (top/audit.py); None when not published."""


def parse_nrt(obj: Mapping[str, Any]) -> ParsedNrt:
    """Parse an object as the API returns it (a dict); never raises for bad values, it warns."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name", ""))
    warnings: list[str] = []
    zones = [_zone(zone, warnings) for zone in obj.get("zones") or [] if zone.get("type", "Node") == "Node"]
    zones.sort(key=lambda z: (z.numa_id is None, z.numa_id or 0, z.name))
    attributes = {str(a.get("name")): str(a.get("value")) for a in obj.get("attributes") or [] if a.get("name")}
    policies = obj.get("topologyPolicies") or []
    if "topologyManagerPolicy" not in attributes and policies:  # older publishers: only this list
        attributes["topologyPolicies"] = ",".join(str(p) for p in policies)
    annotation = (metadata.get("annotations") or {}).get(ALLOCATIONS_ANNOTATION)
    allocations = None if annotation is None else parse_allocations(annotation, warnings)
    audit = parse_audit(metadata.get("annotations") or {}, warnings)
    return ParsedNrt(name, owner_node(obj), tuple(zones), attributes, allocations, tuple(warnings), audit)


def owner_node(obj: Mapping[str, Any]) -> str:
    """The Node the object describes: its Node owner reference, else its own name (the convention)."""
    metadata = obj.get("metadata") or {}
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == "Node" and ref.get("name"):
            return str(ref["name"])
    return str(metadata.get("name", ""))


def parse_allocations(text: str, warnings: list[str]) -> dict[str, Allocation] | None:
    """The annotation's pods; an unreadable annotation warns and gives None (counts are shown alone)."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        warnings.append(f"annotation {ALLOCATIONS_ANNOTATION} is not JSON ({exc}): pods not shown")
        return None
    if not isinstance(data, Mapping):
        warnings.append(f"annotation {ALLOCATIONS_ANNOTATION} is not a JSON object: pods not shown")
        return None
    allocations: dict[str, Allocation] = {}
    for pod, entry in data.items():
        if not isinstance(entry, Mapping):
            warnings.append(f"allocation of {pod}: expected an object, got {type(entry).__name__}")
            continue
        allocations[str(pod)] = _allocation(str(pod), entry, warnings)
    return allocations


def quantity(value: Any, where: str, warnings: list[str]) -> int | None:
    """A quantity ("8589934592", "8Gi", "2000m", 4) in whole units, rounded down; None and a warning if bad."""
    try:
        return math.floor(parse_quantity(value if isinstance(value, int) else str(value), where))
    except ValidationError as exc:
        warnings.append(str(exc))
        return None


def _zone(zone: Mapping[str, Any], warnings: list[str]) -> Zone:
    name = str(zone.get("name", ""))
    match = _ZONE_NAME.match(name)
    resources: dict[str, Amount] = {}
    for resource in zone.get("resources") or []:
        amount = _amount(resource, f"zone {name} {resource.get('name')}", warnings)
        if amount is not None:
            resources[str(resource.get("name"))] = amount
    costs = {}
    for cost in zone.get("costs") or []:
        value = quantity(cost.get("value"), f"zone {name} cost {cost.get('name')}", warnings)
        if value is not None:
            costs[str(cost.get("name"))] = value
    attributes = {str(a.get("name")): str(a.get("value")) for a in zone.get("attributes") or []}
    return Zone(name, int(match.group(1)) if match else None, resources, costs, attributes)


def _amount(resource: Mapping[str, Any], where: str, warnings: list[str]) -> Amount | None:
    """Missing fields fall back (allocatable to capacity, available to allocatable) as older objects need."""
    raw = {key: resource.get(key) for key in ("capacity", "allocatable", "available")}
    if raw["capacity"] is None and raw["allocatable"] is None:
        warnings.append(f"{where}: neither capacity nor allocatable")
        return None
    raw["capacity"] = raw["capacity"] if raw["capacity"] is not None else raw["allocatable"]
    raw["allocatable"] = raw["allocatable"] if raw["allocatable"] is not None else raw["capacity"]
    raw["available"] = raw["available"] if raw["available"] is not None else raw["allocatable"]
    values = {key: quantity(value, f"{where} {key}", warnings) for key, value in raw.items()}
    if any(v is None for v in values.values()):
        return None
    return Amount(values["capacity"] or 0, values["allocatable"] or 0, values["available"] or 0)


def _allocation(pod: str, entry: Mapping[str, Any], warnings: list[str]) -> Allocation:
    where = f"allocation of {pod}"
    cpus: frozenset[int] = frozenset()
    try:
        cpus = parse_cpulist(str(entry.get("cpus") or ""))
    except CpulistError as exc:
        warnings.append(f"{where}: cpus: {exc}")
    numa_nodes = []
    for node in entry.get("numa_nodes") or []:
        if isinstance(node, int) or (isinstance(node, str) and node.isdigit()):
            numa_nodes.append(int(node))
        else:
            warnings.append(f"{where}: numa_nodes: {node!r} is not a NUMA node id")
    memory = {}
    for node, value in _mapping(entry.get("memory"), f"{where}: memory", warnings).items():
        amount = quantity(value, f"{where} memory {node}", warnings)
        if str(node).isdigit() and amount is not None:
            memory[int(node)] = amount
        elif not str(node).isdigit():
            warnings.append(f"{where}: memory: {node!r} is not a NUMA node id")
    devices = {}
    for name, value in _mapping(entry.get("devices"), f"{where}: devices", warnings).items():
        count = quantity(value, f"{where} devices {name}", warnings)
        if count is not None:
            devices[str(name)] = count
    return Allocation(pod, tuple(sorted(cpus)), tuple(sorted(set(numa_nodes))), memory, devices)


def _mapping(value: Any, where: str, warnings: list[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        warnings.append(f"{where}: expected an object, got {type(value).__name__}")
        return {}
    return value
