"""The simulated kubelet of one fleet node: admission by numa-lab's explain engine, allocation, and what the
kubelet and numa-align would then write.

Admission is `numalab.explain.admission.admit` on the NodeState explain itself derives
(`numalab.explain.node_state.node_state`) from this node's published NodeResourceTopology object and Node: the
simulator judges a pod from exactly what `numalab explain` would read, so the two cannot disagree. Once admitted,
the pod gets, on the cells the outcome names, what the kubelet's managers would give it: CPUs (whole free cores
first, then threads of partly held cores, as takeByTopologyNUMAPacked; a take wider than one cell fills the
cells in id order, as explain reports it), its memory and hugepages as one Memory Manager block per type on the
outcome's cells, numa-align devices from their cell. The node's PodResources answer is rebuilt from that and
numa-align's code turns it into the next object (numalab.fleet.nodes.nrt_object). Burstable and BestEffort pods
hold nothing exclusive; their requests count against the Node's allocatable in the kubelet's predicate check,
which the engine runs.

A pod the engine cannot judge (a resource it does not know, pod-level resources, ...) is neither admitted nor
rejected: the decision says "cannot-judge" with why and no status is written.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.audit import stranded_cpus
from numa_align.nrt import exclusive_from_podresources
from numa_align.sysfs import HostTopology

from numalab.explain.admission import admit, device_names
from numalab.explain.node_state import NodeState, node_allocatable, node_state
from numalab.explain.requests import (
    CPU,
    PodRequest,
    SpecError,
    container_devices,
    container_memory,
    guaranteed_cpus,
    pod_request,
    pod_total,
    scheduling_requests,
)
from numalab.fleet.nodes import Pod, devices, node_ip, node_object, nrt_object, shape_allocatable, stand_in_uid
from numalab.fleet.spec import NodeDescription
from numalab.top.nrt import parse_nrt

READY_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")


@dataclass(frozen=True)
class Decision:
    """What the kubelet did with a pod: the status patch to write (None: nothing to write), the node's new
    NodeResourceTopology object (None: unchanged), the verdict (admitted, rejected, cannot-judge), the cells
    per resource, and the kubelet's "Reason: message" (or why it could not be judged)."""

    status_patch: dict[str, Any] | None
    nrt: dict[str, Any] | None
    verdict: str
    cells: Mapping[str, list[int]] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class Holding:
    """What one admitted pod holds: its requests as the predicate counts them, its CPUs and devices, and its
    entry in the kubelet's PodResources List (what it holds exclusively listed under its first container:
    numa-align sums a pod's containers for the object, the annotation and the fingerprint alike)."""

    requests: Mapping[str, int]
    cpus: frozenset[int]
    devices: Mapping[int, tuple[str, ...]]
    resources: pb.PodResources
    cells: Mapping[str, list[int]]


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimulatedKubelet:
    """One node's kubelet and numa-align. `uid` is the Node's (the object's owner reference); `clock` gives the
    RFC 3339 times written into statuses."""

    def __init__(self, node: NodeDescription, uid: str | None = None, clock: Callable[[], str] = now_rfc3339) -> None:
        self.node = node
        self.uid = uid or stand_in_uid(node.name)
        self.node_object = node_object(node)
        self._node_allocatable = node_allocatable(self.node_object)
        self.clock = clock
        shape = node.shape
        self._allocatable = shape_allocatable(shape)
        cpus = self._allocatable.cpus if shape.policy.cpu_manager_policy == "static" else frozenset()
        self.free_cpus: set[int] = set(cpus or ())
        self.free_devices: dict[int, list[str]] = devices(shape)
        self.pods: dict[Pod, Holding] = {}
        self.used: dict[str, int] = {CPU: 0}
        self.admitted = 0
        self.nrt = self._publish()
        self._state: NodeState | None = None

    # -- the state explain would read -------------------------------------------------------------------

    def state(self) -> NodeState:
        """explain's NodeState of this node from its published object and Node (whose allocatable never changes:
        read once); `used` is the admitted pods' requests, which explain's used_by sums from the same pods
        (those bound here and not terminated)."""
        if self._state is None:
            state = node_state(parse_nrt(self.nrt), None, (), None)
            self._state = replace(state, allocatable=self._node_allocatable, used=dict(self.used))
        return self._state

    def _publish(self) -> dict[str, Any]:
        self._listed = pb.ListPodResourcesResponse(pod_resources=[h.resources for h in self.pods.values()])
        self._state = None
        return nrt_object(self.node, self.uid, self._listed, self._allocatable)

    # -- packing, as the bench reads it ---------------------------------------------------------------------

    @property
    def allocatable_millicpu(self) -> int:
        """The Node's allocatable CPU (millicores): what the scheduler and the kubelet's predicate count against."""
        return self._node_allocatable.get(CPU, 0)

    def stranded_cpus(self) -> int:
        """Free CPUs outside this node's largest free cell block, by numa-align's auditor's own definition
        (numa_align.audit.stranded_cpus over what the kubelet hands out exclusively now)."""
        return stranded_cpus(self._allocatable, exclusive_from_podresources(self._listed, self.node.shape.host))

    # -- admission ------------------------------------------------------------------------------------

    def admit(self, pod: Mapping[str, Any]) -> Decision:
        """Judge a pod bound to this node; admitted, allocate it and publish. A pod already held is not judged
        again (no writes)."""
        key = pod_key(pod)
        if key in self.pods:
            return Decision(None, None, "admitted", self.pods[key].cells, "already admitted")
        try:
            request = pod_request(pod, f"pod {key[0]}/{key[1]}")
        except SpecError as exc:
            return Decision(None, None, "cannot-judge", {}, f"cannot judge: {exc}")
        state = self.state()
        outcome = admit(request, state)
        if outcome.verdict == "rejected":
            return Decision(rejected_status(outcome.reason), None, "rejected", {}, outcome.reason)
        if outcome.verdict != "admitted":
            return Decision(None, None, outcome.verdict, {}, outcome.reason)
        holding = self._allocate(key, pod, request, state, outcome.cells)
        self.pods[key] = holding
        for name, value in holding.requests.items():
            self.used[name] = self.used.get(name, 0) + value
        self.admitted += 1
        self.nrt = self._publish()
        status = running_status(pod, node_ip(self.node.index), self._pod_ip(), self.clock())
        return Decision(status, self.nrt, "admitted", outcome.cells, "")

    def release(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod is gone (deleted, or terminated): free what it held; the new object, or None if it held nothing
        here."""
        holding = self.pods.pop((namespace, name), None)
        if holding is None:
            return None
        self.free_cpus |= holding.cpus
        for cell, ids in holding.devices.items():
            self.free_devices[cell].extend(ids)
        for resource, value in holding.requests.items():
            self.used[resource] -= value
        self.nrt = self._publish()
        return self.nrt

    def _allocate(self, key: Pod, pod: Mapping[str, Any], request: PodRequest, state: NodeState,
                  cells: Mapping[str, list[int]]) -> Holding:
        cpus: set[int] = set()
        if CPU in cells:
            count = pod_total(request, lambda c: {CPU: guaranteed_cpus(request, c)}).get(CPU, 0)
            for cell in cells[CPU]:
                taken = take_cpus(self.node.shape.host, self.free_cpus, cell, count - len(cpus))
                cpus |= taken
                self.free_cpus -= taken
        memory = pod_total(request, lambda c: container_memory(request, c))
        blocks = [pb.ContainerMemory(memory_type=kind, size=size, topology=_numa(cells[kind]))
                  for kind, size in sorted(memory.items()) if size and kind in cells]
        held: dict[int, tuple[str, ...]] = {}
        entries = []
        for name, count in sorted(pod_total(request, lambda c: container_devices(c, device_names(state))).items()):
            for cell in cells.get(name, []):
                free = self.free_devices.get(cell, [])
                ids, self.free_devices[cell] = free[:count], free[count:]
                held[cell] = held.get(cell, ()) + tuple(ids)
                entries.append(pb.ContainerDevices(resource_name=name, device_ids=ids, topology=_numa([cell])))
                count -= len(ids)
        names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []] or ["main"]
        first = pb.ContainerResources(name=names[0], cpu_ids=sorted(cpus), memory=blocks, devices=entries)
        containers = [first, *(pb.ContainerResources(name=n) for n in names[1:])]
        resources = pb.PodResources(name=key[1], namespace=key[0], containers=containers)
        requests = {**{k: v for k, v in scheduling_requests(request).items() if v}, "pods": 1}
        return Holding(requests, frozenset(cpus), held, resources, dict(cells))

    def _pod_ip(self) -> str:
        index = self.node.index
        return f"10.{index // 256 % 256}.{index % 256}.{self.admitted % 254 + 1}"


def _numa(cells: list[int]) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=cell) for cell in cells])


def take_cpus(host: HostTopology, free: set[int], cell: int, count: int) -> set[int]:
    """Up to `count` free CPUs of `cell`: whole free cores first (lowest first), then threads of the cores with the
    fewest free threads, as the kubelet's takeByTopologyNUMAPacked packs them."""
    if count <= 0:
        return set()
    mine = sorted(cpu for cpu in free if host.cpus[cpu].node == cell)
    cores: dict[frozenset[int], list[int]] = {}
    for cpu in mine:
        cores.setdefault(host.cpus[cpu].core, []).append(cpu)
    whole = sorted((core for core, cpus in cores.items() if len(cpus) == len(core)), key=min)
    taken: list[int] = []
    for core in whole:
        if len(taken) + len(core) <= count:
            taken += sorted(core)
    partial = sorted((cpus for cpus in cores.values() if not set(cpus) <= set(taken)), key=lambda c: (len(c), c[0]))
    for cpus in partial:
        taken += [cpu for cpu in cpus if cpu not in taken][:count - len(taken)]
    return set(taken[:count])


def pod_key(pod: Mapping[str, Any]) -> Pod:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("namespace") or "default"), str(metadata.get("name"))


def running_status(pod: Mapping[str, Any], host_ip: str, pod_ip: str, now: str) -> dict[str, Any]:
    """The status the kubelet has written once every container runs (a strategic merge patch of the status
    subresource: conditions and container statuses merge by type and name, PodScheduled stays)."""
    spec = pod.get("spec") or {}

    def container(c: Mapping[str, Any], running: bool) -> dict[str, Any]:
        state = ({"running": {"startedAt": now}} if running else
                 {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}})
        return {"name": c.get("name"), "image": c.get("image", ""), "imageID": "", "ready": running,
                "started": running, "restartCount": 0, "containerID": f"containerd://sim-{c.get('name')}",
                "state": state}

    status: dict[str, Any] = {
        "phase": "Running", "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}], "startTime": now,
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now} for kind in READY_CONDITIONS],
        "containerStatuses": [container(c, True) for c in spec.get("containers") or []],
    }
    inits = spec.get("initContainers") or []
    if inits:
        status["initContainerStatuses"] = [container(c, c.get("restartPolicy") == "Always") for c in inits]
    return {"status": status}


def rejected_status(reason: str) -> dict[str, Any]:
    """kubelet rejectPod: phase Failed, the admission error's reason, "Pod was rejected: " and its message."""
    kind, _, message = reason.partition(": ")
    return {"status": {"phase": "Failed", "reason": kind, "message": f"Pod was rejected: {message}"}}
