"""Which pods hold what on this node, for people: the `numa-align/allocations` annotation on the node's
NodeResourceTopology object, which `numalab top` draws (the NRT zones carry counts only, no CPU ids).

Pure: the kubelet's PodResources List answer and the sysfs topology in, a JSON string out. Only pods holding
something exclusive are listed: pinned CPUs, memory the Memory Manager placed, or devices with NUMA affinity.
"""

from __future__ import annotations

import json
from typing import Any

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.cpulist import format_cpulist
from numa_align.nrt_api import ALLOCATIONS_ANNOTATION
from numa_align.sysfs import HostTopology


def pod_allocations(listed: pb.ListPodResourcesResponse, topology: HostTopology) -> dict[str, dict[str, Any]]:
    """{"namespace/pod": {"cpus": "2-3", "numa_nodes": [0], "memory": {"0": bytes}, "devices": {name: n}}}.

    A pod's CPUs, memory blocks and devices are summed over its containers; a CPU or device reported by two
    containers (an init container's, reused) counts once; memory spanning nodes counts on each node.
    """
    found: dict[str, dict[str, Any]] = {}
    for pod in listed.pod_resources:
        cpus: set[int] = set()
        memory: dict[int, int] = {}
        devices: dict[str, set[str]] = {}
        for container in pod.containers:
            cpus.update(container.cpu_ids)
            for block in container.memory:
                for numa in block.topology.nodes:
                    if block.memory_type == "memory" and numa.ID >= 0:
                        memory[numa.ID] = memory.get(numa.ID, 0) + block.size
            for entry in container.devices:
                if any(numa.ID >= 0 for numa in entry.topology.nodes):
                    devices.setdefault(entry.resource_name, set()).update(entry.device_ids)
        if not (cpus or memory or devices):
            continue
        nodes = {topology.cpus[cpu].node for cpu in cpus if cpu in topology.cpus} | set(memory)
        found[f"{pod.namespace}/{pod.name}"] = {
            "cpus": format_cpulist(cpus),
            "numa_nodes": sorted(nodes),
            "memory": {str(node): size for node, size in sorted(memory.items())},
            "devices": {name: len(ids) for name, ids in sorted(devices.items())},
        }
    return dict(sorted(found.items()))


def allocations_annotation(listed: pb.ListPodResourcesResponse, topology: HostTopology) -> dict[str, str]:
    """The annotation, compact and key-sorted so an unchanged node gives an equal object."""
    text = json.dumps(pod_allocations(listed, topology), sort_keys=True, separators=(",", ":"))
    return {ALLOCATIONS_ANNOTATION: text}
