"""What a pod asks of a node, read the way the kubelet's resource managers read it.

Pure: a manifest's objects in, PodRequest out. Workload kinds and their pod template paths come from
numalab.lint.workloads, QoS and defaulted requests from numalab.placement.pod_specs (one way to read a pod spec).
The init-container rule (pod total = max(largest init container + the sidecars before it, app containers +
sidecars)) is the kubelet's: cpumanager podGuaranteedCPUs, memorymanager getPodRequestedResources,
devicemanager getPodDeviceRequest (resource.PodLimits) all apply it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numalab.lint.workloads import POD_SPEC_PATHS, Document, workloads
from numalab.model.errors import ValidationError
from numalab.placement.pod_specs import ContainerRef, containers, effective_requests, parsed_limits, qos_class

CPU, MEMORY = "cpu", "memory"
HUGEPAGES_PREFIX = "hugepages-"
HOST_LEVEL = ("ephemeral-storage", "storage")
"""Resources no NUMA cell holds (scheduler-plugins isHostLevelResource; the kubelet's managers ignore them)."""


class SpecError(ValueError):
    """The input is not something explain can read as a pod: one line naming the object and what to give."""


@dataclass(frozen=True)
class ContainerRequest:
    """One container: kind init, sidecar (init with restartPolicy Always) or app; requests after defaulting
    (cpu in millicores, memory and hugepages in bytes, anything else a count) and its limits."""

    name: str
    kind: str
    requests: Mapping[str, int]
    limits: Mapping[str, int]


@dataclass(frozen=True)
class PodRequest:
    name: str
    qos: str
    containers: tuple[ContainerRequest, ...]
    scheduler_name: str
    node_name: str | None
    overhead: Mapping[str, int] = field(default_factory=dict)
    pod_level_resources: bool = False

    @property
    def guaranteed(self) -> bool:
        return self.qos == "Guaranteed"


def is_memory(resource: str) -> bool:
    return resource == MEMORY or resource.startswith(HUGEPAGES_PREFIX)


def guaranteed_cpus(pod: PodRequest, container: ContainerRequest) -> int:
    """cpumanager guaranteedCPUs: whole CPUs of a Guaranteed pod's container, else 0 (shared pool)."""
    millis = container.requests.get(CPU, 0)
    return millis // 1000 if pod.guaranteed and millis % 1000 == 0 else 0


def container_memory(pod: PodRequest, container: ContainerRequest) -> dict[str, int]:
    """memorymanager getContainerRequestedResources: memory and hugepages-* of a Guaranteed pod's container."""
    if not pod.guaranteed:
        return {}
    return {name: value for name, value in container.requests.items() if is_memory(name)}


def container_devices(container: ContainerRequest, device_names: Iterable[str]) -> dict[str, int]:
    """devicemanager getContainerDeviceRequest: the limits of device-plugin resources (here: those the node's
    cells list)."""
    names = set(device_names)
    return {name: value for name, value in container.limits.items() if name in names and value > 0}


def pod_total(pod: PodRequest, amounts: Callable[[ContainerRequest], Mapping[str, int]]) -> dict[str, int]:
    """The kubelet's pod-level sum: app containers and sidecars add up; a regular init container runs alone
    beside the sidecars started before it; the larger of the two wins, per resource."""
    by_init: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    apps: dict[str, int] = {}
    for container in pod.containers:
        for name, value in amounts(container).items():
            if container.kind == "sidecar":
                sidecars[name] = sidecars.get(name, 0) + value
            elif container.kind == "init":
                by_init[name] = max(by_init.get(name, 0), sidecars.get(name, 0) + value)
            else:
                apps[name] = apps.get(name, 0) + value
    names = set(by_init) | set(sidecars) | set(apps)
    return {name: max(by_init.get(name, 0), apps.get(name, 0) + sidecars.get(name, 0)) for name in names}


def scheduling_requests(pod: PodRequest) -> dict[str, int]:
    """The pod's effective requests as the scheduler counts them (util.GetPodEffectiveRequest): pod_total of
    every request plus the pod's overhead."""
    total = pod_total(pod, lambda c: c.requests)
    for name, value in pod.overhead.items():
        total[name] = total.get(name, 0) + value
    return total


def pod_request(pod: Mapping[str, Any], where: str) -> PodRequest:
    """A PodRequest from an API-shaped Pod (or a workload's template wrapped as one)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: spec is missing or not a mapping")
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or metadata.get("generateName") or "(unnamed)")
    try:
        refs = containers(spec)
        if not [ref for ref in refs if ref.kind == "app"]:
            raise SpecError(f"{where}: spec.containers is empty: a pod needs at least one container")
        parsed = tuple(_container(ref) for ref in refs)
        qos = qos_class(spec)
        overhead = {str(k): _overhead(str(k), v) for k, v in (spec.get("overhead") or {}).items()}
    except ValidationError as exc:
        raise SpecError(f"{where}: {exc}") from None
    node_name = spec.get("nodeName")
    return PodRequest(name, qos, parsed, str(spec.get("schedulerName") or "default-scheduler"),
                      str(node_name) if node_name else None, overhead, bool(spec.get("resources")))


def _container(ref: ContainerRef) -> ContainerRequest:
    return ContainerRequest(ref.name, ref.kind, effective_requests(ref), parsed_limits(ref))


def _overhead(name: str, value: Any) -> int:
    ref = ContainerRef("app", 0, "spec.overhead", {"resources": {"requests": {name: value}}})
    return effective_requests(ref)[name]


def pod_from_documents(source: str, documents: list[Document]) -> PodRequest:
    """The one pod a manifest describes: a Pod, or a workload's pod template. Anything else is refused, by kind."""
    if len(documents) != 1:
        raise SpecError(f"{source}: {len(documents)} documents; explain reads one Pod or workload at a time")
    data = documents[0].data
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: expected a Kubernetes object (a mapping), got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in POD_SPEC_PATHS:
        kinds = ", ".join(POD_SPEC_PATHS)
        raise SpecError(f"{source}: kind {kind!r} carries no pod spec; give one of {kinds}")
    try:
        workload = next(workloads(source, documents))
    except ValidationError as exc:
        raise SpecError(str(exc)) from None
    metadata = data.get("metadata") or {}
    pod = {"metadata": {"name": metadata.get("name") or metadata.get("generateName")}, "spec": workload.pod_spec}
    return pod_request(pod, f"{source}: {workload.object}")
