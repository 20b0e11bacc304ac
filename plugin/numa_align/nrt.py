"""This node's NodeResourceTopology (NRT) object: the per-NUMA view NodeResourceTopologyMatch schedules with.

Pure: the sysfs topology and the kubelet's PodResources answers in, a plain dict for the API server out.
Field names are those of topology.node.k8s.io/v1alpha2 (noderesourcetopology-api, types.go). The scheduler
(kubernetes-sigs/scheduler-plugins) keeps only zones of type "Node" named "node-<id>", decides on each
resource's `available`, and (single-numa-node policy) rejects a pod asking for a native resource (cpu,
memory, hugepages-*) that no zone lists, so every zone lists memory and every zone with CPUs lists cpu.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.cpulist import format_cpulist
from numa_align.devices import RESOURCE_DOMAIN
from numa_align.fingerprint import ATTRIBUTE, ATTRIBUTE_METHOD, METHOD_ALL, METHODS, PREFIX, VERSION
from numa_align.hugepages import RESOURCE_PREFIX as HUGEPAGES_PREFIX
from numa_align.hugepages import resource_name
from numa_align.nrt_api import API_VERSION
from numa_align.nrt_cores import ATTRIBUTE_CPUS_PER_CORE, core_attributes, cpus_per_core
from numa_align.sysfs import HostTopology, NodeInfo

KIND = "NodeResourceTopology"
ZONE_TYPE_NODE = "Node"
ZONE_PREFIX = "node-"
ATTRIBUTE_POLICY = "topologyManagerPolicy"
ATTRIBUTE_SCOPE = "topologyManagerScope"
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
"""The kubelet's topologyManagerPolicy values, verbatim; the scheduler ignores any other value."""
SCOPES = ("container", "pod")
CPU = "cpu"
MEMORY = "memory"


@dataclass(frozen=True)
class NumaQuantities:
    """Whole quantities by NUMA node id and resource name, in base units: CPUs, bytes, devices."""

    by_node: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        kind = type(self).__name__
        frozen: dict[int, Mapping[str, int]] = {}
        for node, resources in self.by_node.items():
            if isinstance(node, bool) or not isinstance(node, int) or node < 0:
                raise ValueError(f"{kind}: NUMA node id {node!r} is not a whole number >= 0")
            for name, quantity in resources.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"{kind}: resource name {name!r} on NUMA node {node} is not a name")
                if isinstance(quantity, bool) or not isinstance(quantity, int):
                    raise ValueError(f"{kind}: {name} on NUMA node {node} is {quantity!r}, not a whole number")
                if quantity < 0:
                    raise ValueError(f"{kind}: {name} on NUMA node {node} is negative ({quantity})")
            frozen[node] = MappingProxyType(dict(resources))
        object.__setattr__(self, "by_node", MappingProxyType(dict(sorted(frozen.items()))))

    def get(self, node: int, resource: str) -> int:
        return self.by_node.get(node, {}).get(resource, 0)


@dataclass(frozen=True)
class Allocatable(NumaQuantities):
    """What the kubelet may hand out per NUMA node (GetAllocatableResources, reserved CPUs and memory left out);
    cpus: their ids, None when not known (whole cores are then not published)."""

    cpus: frozenset[int] | None = None


@dataclass(frozen=True)
class ExclusiveUse(NumaQuantities):
    """What running containers hold exclusively per NUMA node: pinned CPUs, NUMA-placed memory, devices; cpus:
    the pinned CPUs' ids, None when not known."""

    cpus: frozenset[int] | None = None


def zone_name(node: int) -> str:
    return f"{ZONE_PREFIX}{node}"


def node_capacity(node: NodeInfo) -> dict[str, int]:
    """What sysfs says the node has: online CPUs (none on a memory-only node), MemTotal, hugepages in bytes.

    memory is MemTotal, the hugepages inside it, as the kubelet counts capacity: the Memory Manager's
    TotalMemSize of a NUMA node is cadvisor's node memory (MemTotal) and the Node's capacity.memory is the
    machine's MemTotal (the hugepages design keeps capacity what monitoring tools show); only what is
    allocatable leaves the hugepages out (node_allocatable_memory).
    """
    capacity = {CPU: len(node.cpus)} if node.cpus else {}
    capacity[MEMORY] = node.memory
    for size_kib, pages in sorted(node.hugepages.items()):
        if pages:
            capacity[resource_name(size_kib)] = pages * size_kib * 1024
    return capacity


def node_allocatable_memory(node: NodeInfo) -> dict[str, int]:
    """memory and hugepages-* a pod can get on the node when the kubelet does not say (no Static Memory Manager).

    The kubelet's rule: memory allocatable is MemTotal minus the node's hugepages (the Memory Manager's
    machine state: Allocatable = node memory - reserved - hugepages; the Node's allocatable.memory: capacity
    - reservation - every hugepages-* capacity), never below 0. Without the Static policy there is no
    per-NUMA reservation to take off.
    """
    capacity = node_capacity(node)
    pages = {name: size for name, size in capacity.items() if name.startswith(HUGEPAGES_PREFIX)}
    return {MEMORY: max(0, node.memory - sum(pages.values())), **pages}


class _Tally:
    """Per-node sums that validate every CPU and NUMA id against the host and count each CPU or device once."""

    def __init__(self, topology: HostTopology) -> None:
        self.topology = topology
        self.online = {node.id for node in topology.nodes}
        self.counts: dict[int, dict[str, int]] = {node.id: {} for node in topology.nodes}
        self.cpus: set[int] = set()
        self.devices: dict[tuple[int, str], set[str]] = {}

    def add(self, node: int, name: str, quantity: int) -> None:
        self.counts[node][name] = self.counts[node].get(name, 0) + quantity

    def numa_ids(self, topology: pb.TopologyInfo, where: str) -> list[int]:
        """The NUMA ids of a PodResources entry; -1 (no locality) is skipped, an id not online is refused."""
        ids = sorted({node.ID for node in topology.nodes if node.ID >= 0})
        stray = [i for i in ids if i not in self.online]
        if stray:
            raise ValueError(f"{where}: NUMA node(s) {format_cpulist(stray)} not online on this host "
                             f"(online: {format_cpulist(self.online)})")
        return ids

    def add_cpus(self, cpu_ids: Iterable[int], where: str) -> None:
        cpus = set(cpu_ids)
        stray = cpus - self.topology.cpus.keys()
        if stray:
            raise ValueError(f"{where}: CPU(s) {format_cpulist(stray)} not online on this host "
                             f"(online: {format_cpulist(self.topology.cpus)})")
        self.cpus |= cpus

    def add_memory(self, blocks: Iterable[pb.ContainerMemory], where: str) -> None:
        """A block spanning several nodes counts whole on each: the API does not say how it is split, and
        counting it everywhere never offers memory that is taken (resource-topology-exporter does the same)."""
        for block in blocks:
            for node in self.numa_ids(block.topology, f"{where} {block.memory_type}"):
                self.add(node, block.memory_type, block.size)

    def add_devices(self, devices: Iterable[pb.ContainerDevices], where: str) -> None:
        """Devices without NUMA affinity belong to no zone; one on several nodes counts on each."""
        for entry in devices:
            for node in self.numa_ids(entry.topology, f"{where} {entry.resource_name}"):
                self.devices.setdefault((node, entry.resource_name), set()).update(entry.device_ids)

    def result(self) -> dict[int, dict[str, int]]:
        for cpu in self.cpus:
            self.add(self.topology.cpus[cpu].node, CPU, 1)
        for (node, name), ids in sorted(self.devices.items()):
            self.add(node, name, len(ids))
        return self.counts


def allocatable_from_podresources(answer: pb.AllocatableResourcesResponse | None,
                                  topology: HostTopology) -> Allocatable:
    """Allocatable per NUMA node from GetAllocatableResources (None: the kubelet does not serve it).

    The kubelet lists CPUs only under the static CPU Manager policy and memory only under the Static Memory
    Manager policy; otherwise it never refuses a pod for where its CPUs or memory are, so each node's online
    CPUs, its memory less its hugepages and its hugepages count as allocatable (node_allocatable_memory; a zone
    without them would make the scheduler reject every pod asking for them).
    """
    tally = _Tally(topology)
    if answer is not None and answer.cpu_ids:
        tally.add_cpus(answer.cpu_ids, "allocatable cpu_ids")
    else:
        tally.cpus.update(topology.cpus)
    if answer is not None and answer.memory:
        tally.add_memory(answer.memory, "allocatable memory")
    else:
        for node in topology.nodes:
            for name, quantity in node_allocatable_memory(node).items():
                tally.add(node.id, name, quantity)
    if answer is not None:
        tally.add_devices(answer.devices, "allocatable devices")
    return Allocatable(tally.result(), frozenset(tally.cpus))


def exclusive_from_podresources(listed: pb.ListPodResourcesResponse, topology: HostTopology) -> ExclusiveUse:
    """What the listed containers hold per NUMA node: CPUs the CPU Manager pinned, memory the Memory Manager
    placed, devices; a CPU or device reported twice (an init container's, reused) counts once."""
    tally = _Tally(topology)
    for pod in listed.pod_resources:
        for container in pod.containers:
            where = f"pod {pod.namespace}/{pod.name} container {container.name}"
            tally.add_cpus(container.cpu_ids, where)
            tally.add_memory(container.memory, where)
            tally.add_devices(container.devices, where)
    return ExclusiveUse(tally.result(), frozenset(tally.cpus))


def pinned_pods(listed: pb.ListPodResourcesResponse, topology: HostTopology) -> dict[int, int]:
    """Pods per NUMA node with a container holding exclusive CPUs, memory or numa-align devices there.

    A pod pinned across nodes counts on each; ids the host does not have are skipped (exclusive_from_podresources
    refuses them, with a message).
    """
    counts = {node.id: 0 for node in topology.nodes}
    for pod in listed.pod_resources:
        nodes: set[int] = set()
        for container in pod.containers:
            nodes.update(topology.cpus[cpu].node for cpu in container.cpu_ids if cpu in topology.cpus)
            for block in container.memory:
                nodes.update(numa.ID for numa in block.topology.nodes)
            for entry in container.devices:
                if entry.device_ids and entry.resource_name.startswith(RESOURCE_DOMAIN + "/"):
                    nodes.update(numa.ID for numa in entry.topology.nodes)
        for node in nodes & counts.keys():
            counts[node] += 1
    return counts


def build_nrt(node_name: str, node_uid: str, topology: HostTopology, allocatable: Allocatable,
              exclusive: ExclusiveUse, policy: str, scope: str, pods_fingerprint: str | None,
              fingerprint_method: str = METHOD_ALL, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The NRT object, owned by the Node so it goes when the Node goes; one zone per online NUMA node.

    A resource's capacity is what sysfs says (devices: their allocatable count), raised to the allocatable
    if the kubelet sees more; available is allocatable minus exclusive use, never below 0. The fingerprint is
    of every pod the kubelet lists (publishing.py says why); without one (None) the fingerprint attributes are
    left out and the scheduler does not resync from it.
    """
    if not node_name or not node_uid:
        raise ValueError(f"node name {node_name!r} and uid {node_uid!r} must both be given")
    for what, value, known in (("topology manager policy", policy, POLICIES), ("topology manager scope", scope, SCOPES),
                               ("fingerprint method", fingerprint_method, METHODS)):
        if value not in known:
            raise ValueError(f"{what} {value!r} is not one of {', '.join(known)}")
    if pods_fingerprint is not None and not pods_fingerprint.startswith(PREFIX + VERSION):
        raise ValueError(f"pods fingerprint {pods_fingerprint!r} does not start with {PREFIX + VERSION}")
    online = [node.id for node in topology.nodes]
    for what, quantities in (("allocatable", allocatable), ("exclusive use", exclusive)):
        stray = set(quantities.by_node) - set(online)
        if stray:
            raise ValueError(f"{what} names NUMA node(s) {format_cpulist(stray)}, not online on this host "
                             f"(online: {format_cpulist(online)})")
    attributes = [{"name": ATTRIBUTE_POLICY, "value": policy}, {"name": ATTRIBUTE_SCOPE, "value": scope}]
    per_core = cpus_per_core(topology)
    if per_core:
        attributes.append({"name": ATTRIBUTE_CPUS_PER_CORE, "value": str(per_core)})
    no_cpus_held = not any(exclusive.get(node, CPU) for node in exclusive.by_node)
    cores = core_attributes(topology, allocatable.cpus, frozenset() if no_cpus_held else exclusive.cpus)
    if pods_fingerprint is not None:
        attributes += [{"name": ATTRIBUTE, "value": pods_fingerprint},
                       {"name": ATTRIBUTE_METHOD, "value": fingerprint_method}]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": node_name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}],
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "zones": [_zone(node, topology, allocatable, exclusive, cores.get(node.id)) for node in topology.nodes],
        "attributes": attributes,
    }


def _zone(node: NodeInfo, topology: HostTopology, allocatable: Allocatable, exclusive: ExclusiveUse,
          attributes: list | None) -> dict[str, Any]:
    capacity = node_capacity(node)
    names = set(capacity) | set(allocatable.by_node.get(node.id, {}))
    resources = []
    for name in sorted(names, key=_resource_order):
        alloc = allocatable.get(node.id, name)
        resources.append({
            "name": name,
            "capacity": str(max(capacity.get(name, 0), alloc)),
            "allocatable": str(alloc),
            "available": str(max(0, alloc - exclusive.get(node.id, name))),
        })
    zone: dict[str, Any] = {"name": zone_name(node.id), "type": ZONE_TYPE_NODE}
    if node.distances:
        if len(node.distances) != len(topology.nodes):
            raise ValueError(f"NUMA node {node.id}: {len(node.distances)} distances for "
                             f"{len(topology.nodes)} online nodes")
        zone["costs"] = [{"name": zone_name(other.id), "value": distance}
                         for other, distance in zip(topology.nodes, node.distances, strict=True)]
    if attributes:
        zone["attributes"] = attributes
    zone["resources"] = resources
    return zone


def _resource_order(name: str) -> tuple[int, str]:
    """cpu, memory, hugepages, then devices: a stable order, so an unchanged node gives an equal object."""
    return ({CPU: 0, MEMORY: 1}.get(name, 2 if name.startswith(HUGEPAGES_PREFIX) else 3), name)
