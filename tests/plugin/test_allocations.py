"""The `numa-align/allocations` annotation: which pods hold which CPUs, memory and devices on which node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from numa_align.allocations import allocations_annotation, pod_allocations
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.devices import device_id, resource_name
from numa_align.nrt_api import ALLOCATIONS_ANNOTATION
from numa_align.sysfs import read_sysfs

from tests.fakesysfs import GIB_KIB

GIB = 1 << 30


def _numa(*ids: int) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=i) for i in ids])


def test_pods_holding_something_exclusive_are_listed_with_their_cpus_nodes_memory_and_devices(
        make_sysfs: Callable[..., Path]) -> None:
    topology = read_sysfs(make_sysfs({0: "0-3", 2: "4-7"}, memory_kib=4 * GIB_KIB))  # sparse ids: 0 and 2
    device = pb.ContainerDevices(resource_name=resource_name(2), device_ids=[device_id(2, 0)], topology=_numa(2))
    listed = pb.ListPodResourcesResponse(pod_resources=[
        pb.PodResources(namespace="db", name="pg-0", containers=[
            pb.ContainerResources(name="init", cpu_ids=[4, 5], devices=[device]),
            pb.ContainerResources(name="pg", cpu_ids=[5, 6], devices=[device], memory=[
                pb.ContainerMemory(memory_type="memory", size=GIB, topology=_numa(2)),
                pb.ContainerMemory(memory_type="hugepages-2Mi", size=GIB, topology=_numa(2))]),
        ]),
        pb.PodResources(namespace="web", name="shared", containers=[pb.ContainerResources(name="app")]),
        pb.PodResources(namespace="ml", name="wide", containers=[pb.ContainerResources(name="a", cpu_ids=[3, 4])]),
    ])
    assert pod_allocations(listed, topology) == {
        "db/pg-0": {"cpus": "4-6", "numa_nodes": [2], "memory": {"2": GIB}, "devices": {resource_name(2): 1}},
        "ml/wide": {"cpus": "3-4", "numa_nodes": [0, 2], "memory": {}, "devices": {}},
    }
    annotation = allocations_annotation(listed, topology)
    assert list(annotation) == [ALLOCATIONS_ANNOTATION]
    assert json.loads(annotation[ALLOCATIONS_ANNOTATION]) == pod_allocations(listed, topology)
    assert allocations_annotation(pb.ListPodResourcesResponse(), topology) == {ALLOCATIONS_ANNOTATION: "{}"}
