"""One node as explain sees it: its NUMA cells (from the NodeResourceTopology object), its kubelet's manager
settings, its Node's allocatable and what the pods bound to it already request.

Pure: API-shaped dicts in. The object is parsed by numalab.top.nrt (one parser, zone attributes included).
The kubelet's CPU and Memory Manager policies and policy options come from the object's
attributes when numa-align publishes them (numa_align.nrt_cores names them), else from the kubelet's /configz when it
could be read, and are None (unknown) when neither says, so a verdict that needs them says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.nrt_cores import (
    ATTRIBUTE_CPU_OPTIONS,
    ATTRIBUTE_CPU_POLICY,
    ATTRIBUTE_CPUS_PER_CORE,
    ATTRIBUTE_MEMORY_POLICY,
    ATTRIBUTE_TOPOLOGY_OPTIONS,
    ZONE_AVAILABLE_PHYSICAL_CPUS,
    ZONE_FREE_CORES,
)

from numalab.explain.requests import CPU, SpecError, pod_request, scheduling_requests
from numalab.top.nrt import ParsedNrt

TERMINAL_PHASES = ("Succeeded", "Failed")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # strconv.ParseBool's true values, as the kubelet reads options


@dataclass(frozen=True)
class Cell:
    """One NUMA cell; quantities in whole CPUs, bytes or devices. costs: distance to each cell id. physical_cpus:
    free CPUs outside the cores of reserved CPUs, free_cores: cores with every CPU free (None: not published)."""

    id: int
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    available: Mapping[str, int]
    costs: Mapping[int, int] = field(default_factory=dict)
    physical_cpus: int | None = None
    free_cores: int | None = None


@dataclass(frozen=True)
class KubeletSettings:
    """The kubelet's manager settings; None where unknown. Options are the kubelet's {name: value} maps."""

    topology_policy: str
    scope: str
    cpu_policy: str | None = None
    cpu_options: Mapping[str, str] | None = None
    memory_policy: str | None = None
    topology_options: Mapping[str, str] | None = None

    def cpu_option(self, name: str) -> bool | None:
        return None if self.cpu_options is None else self.cpu_options.get(name, "false") in _TRUE

    def topology_option(self, name: str) -> bool | None:
        return None if self.topology_options is None else self.topology_options.get(name, "false") in _TRUE


@dataclass(frozen=True)
class NodeState:
    name: str
    cells: tuple[Cell, ...]
    settings: KubeletSettings
    nrt_policy: str
    nrt_scope: str
    allocatable: Mapping[str, int]
    used: Mapping[str, int]
    memory_groups: Mapping[int, frozenset[int]] | None
    notes: tuple[str, ...] = ()
    cpus_per_core: int | None = None
    """The kubelet's CPUsPerCore from the object's cpusPerCore; None when not published."""

    def cell_ids(self, resource: str | None = None) -> frozenset[int]:
        """Every cell, or those whose object lists `resource` with something allocatable."""
        return frozenset(c.id for c in self.cells if resource is None or c.allocatable.get(resource, 0) > 0)

    def distances(self) -> dict[int, dict[int, int]]:
        return {c.id: dict(c.costs) for c in self.cells}


def _whole(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def cells_from(parsed: ParsedNrt) -> tuple[Cell, ...]:
    """Zones named node-N, with their costs mapped to cell ids (a cost naming another zone is dropped) and their
    whole-core attributes."""
    cells = []
    for zone in parsed.zones:
        if zone.numa_id is None:
            continue
        costs = {int(name.removeprefix("node-")): value for name, value in zone.costs.items()
                 if name.removeprefix("node-").isdigit()}
        published = zone.attributes
        cells.append(Cell(zone.numa_id, {n: a.capacity for n, a in zone.resources.items()},
                          {n: a.allocatable for n, a in zone.resources.items()},
                          {n: a.available for n, a in zone.resources.items()}, costs,
                          _whole(published.get(ZONE_AVAILABLE_PHYSICAL_CPUS)), _whole(published.get(ZONE_FREE_CORES))))
    return tuple(sorted(cells, key=lambda c: c.id))


def published_settings(attributes: Mapping[str, str], notes: list[str]) -> dict[str, Any]:
    """The CPU and Memory Manager settings the object carries, as KubeletSettings fields; an option map that is
    not a JSON object of strings is noted and left out."""
    found: dict[str, Any] = {}
    for field_name, attribute in (("cpu_policy", ATTRIBUTE_CPU_POLICY), ("memory_policy", ATTRIBUTE_MEMORY_POLICY)):
        if attributes.get(attribute):
            found[field_name] = attributes[attribute]
    for field_name, attribute in (("cpu_options", ATTRIBUTE_CPU_OPTIONS),
                                  ("topology_options", ATTRIBUTE_TOPOLOGY_OPTIONS)):
        if attribute not in attributes:
            continue
        try:
            options = json.loads(attributes[attribute])
        except ValueError:
            options = None
        if isinstance(options, dict) and all(isinstance(v, str) for v in options.values()):
            found[field_name] = options
        else:
            notes.append(f"the NodeResourceTopology's {attribute} is not a JSON object of strings: not used")
    return found


def settings_from(parsed: ParsedNrt, kubelet_config: Mapping[str, Any] | None) -> tuple[KubeletSettings, list[str]]:
    """The NRT's policy and scope, overlaid by the kubelet's own /configz (the truth) when it was read; the CPU and
    Memory Manager settings from the object's attributes, else from /configz."""
    notes: list[str] = []
    policy = parsed.attributes.get("topologyManagerPolicy", "")
    scope = parsed.attributes.get("topologyManagerScope", "")
    from_object = published_settings(parsed.attributes, notes)
    if kubelet_config is None:
        if len(from_object) < 4:
            notes.append("the kubelet's /configz could not be read and the NodeResourceTopology does not carry all "
                         "of its CPU and Memory Manager policies and policy options: the others are unknown")
        return KubeletSettings(policy, scope, **from_object), notes
    seen_policy = str(kubelet_config.get("topologyManagerPolicy") or "none")
    seen_scope = str(kubelet_config.get("topologyManagerScope") or "container")
    for what, published, seen in (("policy", policy, seen_policy), ("scope", scope, seen_scope)):
        if published and published != seen:
            notes.append(f"the NodeResourceTopology says topology manager {what} {published!r}, the kubelet's "
                         f"/configz {seen!r}: the kubelet's is used (the NUMA-aware scheduler reads the object's)")
    configured: dict[str, Any] = {
        "cpu_policy": str(kubelet_config.get("cpuManagerPolicy") or "none"),
        "cpu_options": {str(k): str(v) for k, v in (kubelet_config.get("cpuManagerPolicyOptions") or {}).items()},
        "memory_policy": str(kubelet_config.get("memoryManagerPolicy") or "None"),
        "topology_options": {str(k): str(v)
                             for k, v in (kubelet_config.get("topologyManagerPolicyOptions") or {}).items()},
    }
    return KubeletSettings(seen_policy, seen_scope, **{**configured, **from_object}), notes


def node_allocatable(node: Mapping[str, Any] | None) -> dict[str, int]:
    """The Node's status.allocatable in the units requests use (cpu in millicores)."""
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    fake = {"metadata": {"name": "node"}, "spec": {"containers": [{"name": "allocatable",
                                                                   "resources": {"requests": allocatable}}]}}
    try:
        return dict(pod_request(fake, "Node status.allocatable").containers[0].requests)
    except SpecError:
        return {}


def used_by(pods: Iterable[Mapping[str, Any]], node: str) -> tuple[dict[str, int], list[str]]:
    """What the node's running and pending pods request (the kubelet's predicate counts them all)."""
    used: dict[str, int] = {CPU: 0}
    notes: list[str] = []
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
        try:
            requests = scheduling_requests(pod_request(pod, f"pod {key}"))
        except SpecError as exc:
            notes.append(f"not counted: {exc}")
            continue
        for name, value in {**requests, "pods": 1}.items():
            used[name] = used.get(name, 0) + value
    return used, notes


def memory_groups(parsed: ParsedNrt) -> tuple[dict[int, frozenset[int]] | None, list[str]]:
    """Which cells hold Memory Manager allocations and with which others (the single vs multi-NUMA rule), from
    numa-align's allocations annotation: a pod's memory cells are taken as one group. None when the
    annotation is absent (the rule cannot be applied)."""
    if parsed.allocations is None:
        return None, ["numa-align's allocations annotation is absent: the Memory Manager's single vs multi-NUMA "
                      "group rule cannot be applied"]
    groups: dict[int, frozenset[int]] = {}
    notes = []
    for allocation in parsed.allocations.values():
        cells = frozenset(cell for cell, size in allocation.memory.items() if size > 0)
        if len(cells) > 1:
            notes.append(f"{allocation.pod} holds memory on cells {','.join(map(str, sorted(cells)))}: taken as "
                         "one multi-NUMA group (the annotation sums a pod's containers)")
        for cell in cells:
            groups[cell] = groups.get(cell, frozenset()) | cells
    return groups, notes


def node_state(parsed: ParsedNrt, node: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]],
               kubelet_config: Mapping[str, Any] | None) -> NodeState:
    settings, notes = settings_from(parsed, kubelet_config)
    used, used_notes = used_by(pods, parsed.node)
    groups, group_notes = memory_groups(parsed)
    attributes = parsed.attributes
    return NodeState(parsed.node, cells_from(parsed), settings, attributes.get("topologyManagerPolicy", ""),
                     attributes.get("topologyManagerScope", ""), node_allocatable(node), used, groups,
                     tuple(notes + used_notes + group_notes + list(parsed.warnings)),
                     _whole(attributes.get(ATTRIBUTE_CPUS_PER_CORE)))
