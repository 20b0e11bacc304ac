"""The API objects of one simulated node: its Node (for kwok to keep alive) and its NodeResourceTopology object.

The object is numa-align's own: `numa_align.nrt.build_nrt` over the host as numa-align's sysfs reader would see
it (`host_topology`, a model-to-sysfs adapter), with allocatable and exclusive use derived by numa-align from
PodResources answers (`allocatable_from_podresources`, `exclusive_from_podresources`) that the simulated kubelet
gives as a real kubelet would, the allocations annotation from `numa_align.allocations` and the fingerprint from
`numa_align.fingerprint` over every pod that answer lists, as numa-align signs it. One addition: the CPU and
Memory Manager policies and options as object attributes (the names numa_align.nrt_cores gives them), because
explain reads them from the kubelet's /configz otherwise and a kwok node serves none; the NUMA-aware scheduler
ignores them.

The Node's capacity and allocatable are the kubelet's: allocatable = capacity less kube- and system-reserved and
the hard memory eviction threshold, less every hugepage size from memory, and, with reserved-cpus set, exactly
the reserved CPUs' count from cpu (the kubelet then drops kube-reserved cpu and sets system-reserved cpu to it).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from numa_align.allocations import allocations_annotation
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.devices import device_count, device_id, resource_name
from numa_align.fingerprint import METHOD_ALL, pod_fingerprint
from numa_align.nrt import Allocatable, allocatable_from_podresources, build_nrt, exclusive_from_podresources
from numa_align.nrt_cores import (
    ATTRIBUTE_CPU_OPTIONS,
    ATTRIBUTE_CPU_POLICY,
    ATTRIBUTE_MEMORY_POLICY,
    ATTRIBUTE_TOPOLOGY_OPTIONS,
)
from numa_align.sysfs import CpuInfo, HostTopology, NodeInfo

from numalab.model.cell import page_bytes
from numalab.model.kubelet_checkpoints import Machine, default_machine_state
from numalab.model.kubelet_reservations import eviction_thresholds, reservation
from numalab.model.plugin_settings import KUBELET_DEFAULT_SCOPE
from numalab.model.quantity import format_bytes, format_millis
from numalab.model.topology import Topology

if TYPE_CHECKING:
    from numalab.fleet.spec import NodeDescription, NodeShape

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok's controller keeps the Nodes carrying it with the value `fake` alive (heartbeats, Ready)."""
SHAPE_LABEL = "node.kubernetes.io/instance-type"
POLICY_LABEL = "numa-lab/topology-manager-policy"
MAX_PODS = 110
"""The kubelet's default maxPods; numa-lab does not change it."""
Pod = tuple[str, str]
"""(namespace, name)."""


def host_topology(topology: Topology) -> HostTopology:
    """The host numa-align's sysfs reader would read on a server of this shape: every cell a node with its
    distance row (10/20 when the model has none), each online CPU with its core and package (the cell's when the
    model does not say)."""
    ids = topology.ids
    nodes = tuple(NodeInfo(cell.id, cell.cpus, cell.memory, tuple(topology.distance(cell.id, other) for other in ids),
                           {page_bytes(size, "hugepages") // 1024: count for size, count in cell.hugepages.items()},
                           cell.offline_cpus) for cell in topology.cells)
    cpus = {}
    for cpu in sorted(topology.cpus):
        cell = topology.cell_of_cpu(cpu).id
        package = topology.packages[cpu] if topology.packages is not None else cell
        cpus[cpu] = CpuInfo(cpu, cell, topology.core_of(cpu), package)
    return HostTopology(nodes, cpus)


def stand_in_uid(name: str) -> str:
    """A Node uid for objects built before the API server gave the real one (tests, dry runs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.fleet.numa-lab"))


def devices(shape: NodeShape) -> dict[int, list[str]]:
    """numa-align's device ids per cell with CPUs (memory-only cells advertise none), as its settings count them."""
    plugin = shape.plugin
    return {node.id: [device_id(node.id, i) for i in range(device_count(node.cpus, plugin.capacity,
                                                                          plugin.reserved_cpus))]
            for node in shape.host.cpu_nodes}


def node_resources(shape: NodeShape) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the kubelet reports them for this shape and policy."""
    topology, policy = shape.topology, shape.policy
    kube = reservation(policy.kube_reserved, "kube-reserved")
    system = reservation(policy.system_reserved, "system-reserved")
    eviction = eviction_thresholds(policy.eviction_hard, policy.memory_manager_policy or "None", "eviction-hard")
    cpus = len(topology.cpus)
    held = len(policy.reserved_cpus) * 1000 if policy.reserved_cpus else kube.get("cpu", 0) + system.get("cpu", 0)
    pages: dict[str, int] = {}
    for cell in topology.cells:
        for size in cell.hugepages:
            pages[f"hugepages-{size}"] = pages.get(f"hugepages-{size}", 0) + cell.hugepage_bytes(size)
    memory = topology.memory - sum(pages.values()) - kube.get("memory", 0) - system.get("memory", 0) \
        - eviction.get("memory", 0)
    extended = {resource_name(cell): str(len(ids)) for cell, ids in devices(shape).items()}
    shown = {name: format_bytes(size) for name, size in sorted(pages.items())}
    capacity = {"cpu": str(cpus), "memory": format_bytes(topology.memory), **shown, "pods": str(MAX_PODS), **extended}
    allocatable = {"cpu": format_millis(cpus * 1000 - held), "memory": format_bytes(max(0, memory)), **shown,
                   "pods": str(MAX_PODS), **extended}
    return capacity, allocatable


def node_ip(index: int) -> str:
    return f"172.{16 + index // 65536}.{index // 256 % 256}.{index % 256}"


def node_object(desc: NodeDescription) -> dict[str, Any]:
    """The Node to create (a Node's status is kept on create): kwok's annotation, labels naming the shape."""
    capacity, allocatable = node_resources(desc.shape)
    labels = {"kubernetes.io/hostname": desc.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok", SHAPE_LABEL: desc.shape.name, POLICY_LABEL: desc.shape.policy.topology_manager_policy}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": desc.name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": allocatable,
                   "addresses": [{"type": "InternalIP", "address": node_ip(desc.index)},
                                 {"type": "Hostname", "address": desc.name}],
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "kubeletVersion": f"v{desc.shape.policy.kubelet_version}.0-sim"}},
    }


def _topology(cells: Iterable[int]) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=cell) for cell in cells])


def allocatable_answer(shape: NodeShape) -> pb.AllocatableResourcesResponse:
    """GetAllocatableResources as the kubelet answers it: CPUs only under the static CPU Manager (the reserved
    ones left out), memory only under the Static Memory Manager (its machine state's allocatable per cell and
    type, sizes of 0 left out), numa-align's devices always."""
    policy = shape.policy
    answer = pb.AllocatableResourcesResponse()
    if policy.cpu_manager_policy == "static":
        answer.cpu_ids.extend(sorted(shape.topology.cpus - policy.reserved_cpus))
    if policy.memory_manager_policy == "Static":
        state = default_machine_state(Machine.from_sysfs(shape.host), policy.reserved_memory)
        for cell, entry in sorted(state.items()):
            for kind, table in sorted(entry["memoryMap"].items()):
                if table["allocatable"]:
                    answer.memory.add(memory_type=kind, size=table["allocatable"], topology=_topology([cell]))
    for cell, ids in devices(shape).items():
        answer.devices.add(resource_name=resource_name(cell), device_ids=ids, topology=_topology([cell]))
    return answer


@functools.cache
def shape_allocatable(shape: NodeShape) -> Allocatable:
    """numa-align's per-cell allocatable for the shape: the same for every node of it, so made once."""
    return allocatable_from_podresources(allocatable_answer(shape), shape.host)


def manager_attributes(shape: NodeShape) -> list[dict[str, str]]:
    """The CPU and Memory Manager settings explain reads from a kubelet's /configz, as object attributes (the names
    numa_align.nrt_cores gives them; option maps as key-sorted JSON objects)."""
    policy = shape.policy

    def options(values: Any) -> str:
        return json.dumps(dict(values), sort_keys=True, separators=(",", ":"))

    return [{"name": ATTRIBUTE_CPU_POLICY, "value": policy.cpu_manager_policy},
            {"name": ATTRIBUTE_CPU_OPTIONS, "value": options(policy.cpu_manager_policy_options)},
            {"name": ATTRIBUTE_MEMORY_POLICY, "value": policy.memory_manager_policy or "None"},
            {"name": ATTRIBUTE_TOPOLOGY_OPTIONS, "value": options(policy.topology_manager_policy_options)}]


def nrt_object(desc: NodeDescription, uid: str, listed: pb.ListPodResourcesResponse | None = None,
               allocatable: Allocatable | None = None) -> dict[str, Any]:
    """The node's NodeResourceTopology object as numa-align publishes it for the kubelet's PodResources List
    answer `listed` (None: no pod), its fingerprint over every pod listed (METHOD_ALL)."""
    shape = desc.shape
    listed = listed if listed is not None else pb.ListPodResourcesResponse()
    policy = shape.policy
    admitted = sorted((pod.namespace, pod.name) for pod in listed.pod_resources)
    obj = build_nrt(desc.name, uid, shape.host, allocatable or shape_allocatable(shape),
                    exclusive_from_podresources(listed, shape.host), policy.topology_manager_policy,
                    policy.topology_manager_scope or KUBELET_DEFAULT_SCOPE, pod_fingerprint(admitted),
                    METHOD_ALL, allocations_annotation(listed, shape.host))
    obj["attributes"].extend(manager_attributes(shape))
    return obj
