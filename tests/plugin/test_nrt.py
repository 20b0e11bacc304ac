"""The NRT object from fake sysfs trees and PodResources answers: SMT, memory-only nodes, hugepages, pods
holding exclusive CPUs, memory and devices, kubelets without CPU or Memory Manager, and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.devices import device_id, resource_name
from numa_align.fingerprint import METHOD_WITH_EXCLUSIVE_RESOURCES, fingerprint_pods, pod_fingerprint
from numa_align.hugepages import resource_name as hugepage_resource_name
from numa_align.nrt import (
    Allocatable,
    ExclusiveUse,
    allocatable_from_podresources,
    build_nrt,
    exclusive_from_podresources,
)
from numa_align.nrt_api import API_VERSION
from numa_align.sysfs import HostTopology, read_sysfs

from tests.fakesysfs import GIB_KIB

GIB = 1 << 30
MIB = 1 << 20
UID = "6f1c2b8e-0d5a-4c1e-9b7a-2f3e4d5c6b7a"


def _numa(*ids: int) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=i) for i in ids])


def _memory(kind: str, size: int, *nodes: int) -> pb.ContainerMemory:
    return pb.ContainerMemory(memory_type=kind, size=size, topology=_numa(*nodes))


def _devices(node: int, *indexes: int) -> list[pb.ContainerDevices]:
    """One entry per device, as the kubelet lists them."""
    return [pb.ContainerDevices(resource_name=resource_name(node), device_ids=[device_id(node, i)],
                                topology=_numa(node)) for i in indexes]


@pytest.fixture
def smt_host(make_sysfs: Callable[..., Path]) -> HostTopology:
    """Two sockets x 4 cores x 2 threads numbered as Intel does (siblings N and N+8), 4 GiB per node, 512
    2 MiB pages and one 1 GiB page on node 0, none on node 1, distance 21 across."""
    return read_sysfs(make_sysfs(
        {0: "0-3,8-11", 1: "4-7,12-15"}, memory_kib=4 * GIB_KIB, distances={0: [10, 21], 1: [21, 10]},
        hugepages={0: {2048: 512, 1048576: 1}, 1: {2048: 0, 1048576: 0}}, cores=[f"{c},{c + 8}" for c in range(8)]))


@pytest.fixture
def kubelet_allocatable() -> pb.AllocatableResourcesResponse:
    """Static CPU and Memory Managers, CPUs 0 and 8 reserved, three numa-align devices per node."""
    return pb.AllocatableResourcesResponse(
        cpu_ids=[c for c in range(16) if c not in (0, 8)],
        memory=[_memory("memory", 3 * GIB, 0), _memory("hugepages-2Mi", GIB, 0), _memory("hugepages-1Gi", GIB, 0),
                _memory("memory", 3584 * MIB, 1)],
        devices=_devices(0, 0, 1, 2) + _devices(1, 0, 1, 2),
    )


@pytest.fixture
def kubelet_listed() -> pb.ListPodResourcesResponse:
    """numa/pinned holds CPUs 1,9 and 2,10, 1 GiB and 512 MiB of 2 MiB pages on node 0 and one numa-0 device
    (listed for both containers: counted once); numa/wide holds CPUs 4,12 and 2 GiB spread over both nodes."""
    return pb.ListPodResourcesResponse(pod_resources=[
        pb.PodResources(namespace="numa", name="pinned", containers=[
            pb.ContainerResources(name="app", cpu_ids=[1, 9], devices=_devices(0, 0),
                                  memory=[_memory("memory", GIB, 0), _memory("hugepages-2Mi", 512 * MIB, 0)]),
            pb.ContainerResources(name="side", cpu_ids=[2, 10], devices=_devices(0, 0)),
        ]),
        pb.PodResources(namespace="numa", name="wide", containers=[
            pb.ContainerResources(name="app", cpu_ids=[4, 12], memory=[_memory("memory", 2 * GIB, 0, 1)]),
        ]),
        pb.PodResources(namespace="default", name="burstable", containers=[pb.ContainerResources(name="app")]),
    ])


def _resources(nrt: dict, zone: str) -> dict[str, tuple[str, str, str]]:
    [found] = [z for z in nrt["zones"] if z["name"] == zone]
    return {r["name"]: (r["capacity"], r["allocatable"], r["available"]) for r in found["resources"]}


def test_two_node_smt_host_with_pods_holding_exclusive_resources(smt_host, kubelet_allocatable, kubelet_listed):
    nrt = build_nrt("worker-1", UID, smt_host, allocatable_from_podresources(kubelet_allocatable, smt_host),
                    exclusive_from_podresources(kubelet_listed, smt_host), "single-numa-node", "pod", None)
    assert [z["name"] for z in nrt["zones"]] == ["node-0", "node-1"]
    assert all(z["type"] == "Node" for z in nrt["zones"])
    assert [r["name"] for r in nrt["zones"][0]["resources"]] == [
        "cpu", "memory", "hugepages-1Gi", "hugepages-2Mi", "numa-align/numa-0"]
    assert _resources(nrt, "node-0") == {
        "cpu": ("8", "6", "2"),  # 0,8 reserved; 1,9,2,10 pinned
        "memory": (str(4 * GIB), str(3 * GIB), "0"),  # 1 GiB pinned + the 2 GiB block spanning both nodes
        "hugepages-1Gi": (str(GIB), str(GIB), str(GIB)),
        "hugepages-2Mi": (str(GIB), str(GIB), str(512 * MIB)),
        "numa-align/numa-0": ("3", "3", "2"),
    }
    assert _resources(nrt, "node-1") == {
        "cpu": ("8", "8", "6"),
        "memory": (str(4 * GIB), str(3584 * MIB), str(1536 * MIB)),
        "numa-align/numa-1": ("3", "3", "3"),
    }
    assert nrt["zones"][0]["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert nrt["zones"][1]["costs"] == [{"name": "node-0", "value": 21}, {"name": "node-1", "value": 10}]


def test_object_metadata_and_attributes(smt_host, kubelet_allocatable, kubelet_listed):
    pods = fingerprint_pods(kubelet_listed.pod_resources, METHOD_WITH_EXCLUSIVE_RESOURCES)
    assert pods == [("numa", "pinned"), ("numa", "wide")]
    fingerprint = pod_fingerprint(pods)
    nrt = build_nrt("worker-1", UID, smt_host, Allocatable(), ExclusiveUse(), "single-numa-node", "container",
                    fingerprint, METHOD_WITH_EXCLUSIVE_RESOURCES)
    assert json.loads(json.dumps(nrt)) == nrt
    assert (nrt["apiVersion"], nrt["kind"]) == (API_VERSION, "NodeResourceTopology")
    assert nrt["metadata"] == {"name": "worker-1", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "worker-1", "uid": UID}]}
    assert nrt["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "container"},
        {"name": "cpusPerCore", "value": "2"},
        {"name": "nodeTopologyPodsFingerprint", "value": fingerprint},
        {"name": "nodeTopologyPodsFingerprintMethod", "value": "with-exclusive-resources"},
    ]
    assert "topologyPolicies" not in nrt  # deprecated; the scheduler prefers the attributes


def test_without_a_fingerprint_only_the_topology_manager_attributes_and_cpus_per_core(smt_host):
    nrt = build_nrt("w", UID, smt_host, Allocatable(), ExclusiveUse(), "restricted", "pod", None)
    assert [a["name"] for a in nrt["attributes"]] == ["topologyManagerPolicy", "topologyManagerScope", "cpusPerCore"]


def test_memory_only_node_gets_memory_and_hugepages_but_no_cpu(make_sysfs):
    host = read_sysfs(make_sysfs({0: "0-3", 1: "4-7", 2: ""},
                                 memory_kib={0: 4 * GIB_KIB, 1: 4 * GIB_KIB, 2: 16 * GIB_KIB},
                                 hugepages={2: {2048: 1024}}))
    listed = pb.ListPodResourcesResponse(pod_resources=[pb.PodResources(namespace="n", name="p", containers=[
        pb.ContainerResources(name="c", cpu_ids=[0], memory=[_memory("memory", 6 * GIB, 0, 2)])])])
    allocatable = pb.AllocatableResourcesResponse(
        cpu_ids=range(8), memory=[_memory("memory", 4 * GIB, n) for n in (0, 1)]
        + [_memory("memory", 16 * GIB, 2), _memory("hugepages-2Mi", 2 * GIB, 2)])
    nrt = build_nrt("w", UID, host, allocatable_from_podresources(allocatable, host),
                    exclusive_from_podresources(listed, host), "single-numa-node", "container", None)
    assert _resources(nrt, "node-2") == {
        "memory": (str(16 * GIB), str(16 * GIB), str(10 * GIB)),
        "hugepages-2Mi": (str(2 * GIB), str(2 * GIB), str(2 * GIB)),
    }
    assert _resources(nrt, "node-0")["memory"] == (str(4 * GIB), str(4 * GIB), "0")
    assert [c["name"] for c in nrt["zones"][2]["costs"]] == ["node-0", "node-1", "node-2"]


def test_kubelet_without_cpu_or_memory_manager_offers_what_sysfs_shows(smt_host):
    """memory: capacity MemTotal (4 GiB, the kubelet's TotalMemSize and Node capacity), allocatable MemTotal
    less node 0's 2 GiB of hugepages (the kubelet's allocatable never counts them as memory too)."""
    none_policies = pb.AllocatableResourcesResponse(devices=_devices(1, 0))  # no cpu_ids, no memory
    for answer in (none_policies, None):  # None: GetAllocatableResources not served
        nrt = build_nrt("w", UID, smt_host, allocatable_from_podresources(answer, smt_host), ExclusiveUse(),
                        "best-effort", "container", None)
        assert _resources(nrt, "node-0") == {
            "cpu": ("8", "8", "8"), "memory": (str(4 * GIB), str(2 * GIB), str(2 * GIB)),
            "hugepages-1Gi": (str(GIB),) * 3, "hugepages-2Mi": (str(GIB),) * 3,
        }
        assert _resources(nrt, "node-1")["memory"] == (str(4 * GIB),) * 3  # no hugepages there
        assert _resources(nrt, "node-1").get("numa-align/numa-1") == (("1",) * 3 if answer else None)


def test_offline_cpus_and_sparse_node_ids(make_sysfs):
    host = read_sysfs(make_sysfs({0: "0-3", 7: "4-7"}, offline_cpus="3,7"))
    nrt = build_nrt("w", UID, host, allocatable_from_podresources(None, host), ExclusiveUse(), "none", "pod", None)
    assert [z["name"] for z in nrt["zones"]] == ["node-0", "node-7"]
    assert _resources(nrt, "node-7")["cpu"] == ("3", "3", "3")
    with pytest.raises(ValueError, match=r"allocatable cpu_ids: CPU\(s\) 7 not online on this host"):
        allocatable_from_podresources(pb.AllocatableResourcesResponse(cpu_ids=[6, 7]), host)


def test_available_never_negative_and_capacity_never_below_allocatable(smt_host):
    allocatable = Allocatable({0: {"numa-align/numa-0": 2, "hugepages-1Gi": 2 * GIB}})
    exclusive = ExclusiveUse({0: {"numa-align/numa-0": 5}})
    resources = _resources(build_nrt("w", UID, smt_host, allocatable, exclusive, "none", "pod", None), "node-0")
    assert resources["numa-align/numa-0"] == ("2", "2", "0")
    assert resources["hugepages-1Gi"] == (str(2 * GIB), str(2 * GIB), str(2 * GIB))  # pages freed since


@pytest.mark.parametrize(("size_kib", "name"), [
    (64, "hugepages-64Ki"), (2048, "hugepages-2Mi"), (32768, "hugepages-32Mi"), (524288, "hugepages-512Mi"),
    (1048576, "hugepages-1Gi"), (16 * 1048576, "hugepages-16Gi"),
])
def test_hugepage_resource_names_as_the_kubelet_writes_them(size_kib: int, name: str):
    assert hugepage_resource_name(size_kib) == name


def test_quantities_are_read_only_and_compared_by_kind():
    source = {0: {"cpu": 2}}
    allocatable = Allocatable(source)
    source[0]["cpu"] = 5
    assert allocatable.get(0, "cpu") == 2 and allocatable.get(1, "memory") == 0
    with pytest.raises(TypeError):
        allocatable.by_node[0]["cpu"] = 3  # type: ignore[index]
    assert allocatable == Allocatable({0: {"cpu": 2}}) and allocatable != ExclusiveUse({0: {"cpu": 2}})


@pytest.mark.parametrize(("make", "words"), [
    (lambda: Allocatable({0: {"cpu": -1}}), "Allocatable: cpu on NUMA node 0 is negative"),
    (lambda: ExclusiveUse({1: {"memory": 1.5}}), "ExclusiveUse: memory on NUMA node 1 is 1.5, not a whole"),
    (lambda: Allocatable({-1: {}}), "NUMA node id -1"),
])
def test_bad_quantities_are_refused(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_ids_the_host_does_not_have_are_refused(smt_host):
    listed = pb.ListPodResourcesResponse(pod_resources=[pb.PodResources(namespace="n", name="p", containers=[
        pb.ContainerResources(name="c", cpu_ids=[3, 42, 43])])])
    with pytest.raises(ValueError, match=r"pod n/p container c: CPU\(s\) 42-43 not online .*online: 0-15"):
        exclusive_from_podresources(listed, smt_host)
    with pytest.raises(ValueError, match=r"allocatable devices numa-align/numa-5: NUMA node\(s\) 5 not online"):
        allocatable_from_podresources(pb.AllocatableResourcesResponse(devices=_devices(5, 0)), smt_host)
    with pytest.raises(ValueError, match=r"allocatable names NUMA node\(s\) 7, not online .*online: 0-1"):
        build_nrt("w", UID, smt_host, Allocatable({7: {"cpu": 1}}), ExclusiveUse(), "none", "pod", None)
    with pytest.raises(ValueError, match=r"exclusive use names NUMA node\(s\) 2"):
        build_nrt("w", UID, smt_host, Allocatable(), ExclusiveUse({2: {}}), "none", "pod", None)


def test_no_locality_devices_belong_to_no_zone(smt_host):
    answer = pb.AllocatableResourcesResponse(devices=[
        pb.ContainerDevices(resource_name="vendor/nic", device_ids=["a"]),
        pb.ContainerDevices(resource_name="vendor/nic", device_ids=["b"], topology=_numa(-1))])
    assert all("vendor/nic" not in row for row in allocatable_from_podresources(answer, smt_host).by_node.values())


@pytest.mark.parametrize(("changes", "words"), [
    ({"policy": "single-numa"}, "topology manager policy 'single-numa'"),
    ({"scope": "Pod"}, "topology manager scope 'Pod'"),
    ({"fingerprint_method": "exclusive"}, "fingerprint method 'exclusive'"),
    ({"pods_fingerprint": "pfp0v002ef46db3751d8e999"}, "does not start with pfp0v001"),
    ({"node_uid": ""}, "uid '' must both be given"),
])
def test_bad_settings_are_refused(smt_host, changes, words):
    arguments = {"node_name": "w", "node_uid": UID, "topology": smt_host, "allocatable": Allocatable(),
                 "exclusive": ExclusiveUse(), "policy": "none", "scope": "pod", "pods_fingerprint": None}
    with pytest.raises(ValueError, match=words):
        build_nrt(**{**arguments, **changes})
