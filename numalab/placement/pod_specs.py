"""QoS and pinning rules over pod specs (manifest dicts, camelCase keys), as the API server and kubelet apply them.

One way to read a pod spec, shared by the lint (before a manifest is applied), `numalab explain` and the e2e suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.devices import node_of_resource

from numalab.model.errors import ValidationError
from numalab.model.quantity import parse_bytes, parse_cpu_millis

QOS_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class ContainerRef:
    """A container of a pod spec with the field path that reaches it (e.g. spec.initContainers[0])."""

    kind: str  # "init", "sidecar" (init with restartPolicy Always) or "app"
    index: int
    path: str
    spec: Mapping[str, Any] = field(repr=False)

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or f"#{self.index}")


def containers(pod_spec: Mapping[str, Any], path: str = "spec") -> list[ContainerRef]:
    """Init containers (sidecars marked as such) in order, then app containers."""
    found: list[ContainerRef] = []
    for key, kind in (("initContainers", "init"), ("containers", "app")):
        items = pod_spec.get(key) or []
        if not isinstance(items, list):
            got = type(items).__name__
            raise ValidationError(f"{path}.{key}", f"expected a list of containers, got {got}")
        for index, spec in enumerate(items):
            where = f"{path}.{key}[{index}]"
            if not isinstance(spec, Mapping):
                raise ValidationError(where, f"expected a container mapping, got {type(spec).__name__}")
            this_kind = "sidecar" if kind == "init" and spec.get("restartPolicy") == "Always" else kind
            found.append(ContainerRef(this_kind, index, where, spec))
    return found


def resource_map(container: ContainerRef, section: str) -> dict[str, Any]:
    """resources.requests or resources.limits as a dict (empty when absent)."""
    resources = container.spec.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise ValidationError(f"{container.path}.resources", "expected a mapping")
    values = resources.get(section) or {}
    if not isinstance(values, Mapping):
        raise ValidationError(f"{container.path}.resources.{section}", "expected a mapping")
    return {str(k): v for k, v in values.items()}


def _amount(resource: str, value: Any, where: str) -> int:
    if resource == "cpu":
        return parse_cpu_millis(value, where)
    if resource == "memory":
        return parse_bytes(value, where)
    return whole_count(value, where)


def whole_count(value: Any, where: str) -> int:
    """An extended resource's amount (numa-align/numa-N in a spec or a Node's allocatable): integers only."""
    millis = parse_cpu_millis(value, where)
    if millis % 1000:
        raise ValidationError(where, f"{value!r} is not a whole count (extended resources are integers)")
    return millis // 1000


def effective_requests(container: ContainerRef) -> dict[str, int]:
    """Requests after the API server's defaulting (a missing request takes its limit), parsed:
    cpu in millicores, memory in bytes, anything else as a count."""
    requests = resource_map(container, "requests")
    limits = resource_map(container, "limits")
    merged = {**{k: v for k, v in limits.items()}, **requests}
    base = f"{container.path}.resources"
    return {
        name: _amount(name, value, f"{base}.{'requests' if name in requests else 'limits'}.{name}")
        for name, value in merged.items()
    }


def parsed_limits(container: ContainerRef) -> dict[str, int]:
    limits = resource_map(container, "limits")
    base = f"{container.path}.resources.limits"
    return {name: _amount(name, value, f"{base}.{name}") for name, value in limits.items()}


def guaranteed_problems(container: ContainerRef) -> list[tuple[str, str]]:
    """Why this container keeps its pod from being Guaranteed: [(field path, reason)], empty if it
    does not. Kubernetes requires cpu and memory limits on every container, with requests equal."""
    requests = effective_requests(container)
    limits = parsed_limits(container)
    base = f"{container.path}.resources"
    problems: list[tuple[str, str]] = []
    for resource in QOS_RESOURCES:
        if resource not in limits:
            problems.append((f"{base}.limits.{resource}", f"no {resource} limit"))
        elif requests[resource] != limits[resource]:
            problems.append((f"{base}.requests.{resource}", f"{resource} request differs from its limit"))
    return problems


def qos_class(pod_spec: Mapping[str, Any], path: str = "spec") -> str:
    """Guaranteed, Burstable or BestEffort, by the rules the API server applies to status.qosClass."""
    refs = containers(pod_spec, path)
    if all(not guaranteed_problems(ref) for ref in refs) and refs:
        return "Guaranteed"
    for ref in refs:
        amounts = {**effective_requests(ref), **parsed_limits(ref)}
        if any(amounts.get(resource) for resource in QOS_RESOURCES):
            return "Burstable"
    return "BestEffort"


def exclusive_cpus(pod_spec: Mapping[str, Any], container: ContainerRef, path: str = "spec") -> int:
    """Exclusive cpus the static CPU Manager gives this container: its cpu count when the pod is
    Guaranteed and the request is whole cores, else 0 (it runs in the shared pool)."""
    if qos_class(pod_spec, path) != "Guaranteed":
        return 0
    millis = effective_requests(container).get("cpu", 0)
    return millis // 1000 if millis % 1000 == 0 else 0


def numa_align_requests(container: ContainerRef) -> dict[int, int]:
    """{node: count} of the numa-align resources this container gets (limits, the binding ones)."""
    found: dict[int, int] = {}
    for name, value in resource_map(container, "limits").items():
        node = node_of_resource(name)
        if node is not None:
            found[node] = whole_count(value, f"{container.path}.resources.limits.{name}")
    return found
