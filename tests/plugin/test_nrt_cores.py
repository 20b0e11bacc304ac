"""The whole-core attributes of the NRT object on fake SMT sysfs trees: what the kubelet's full-pcpus-only check
(k8s.io/kubernetes v1.36.3 cpumanager policy_static.go enforceSMTAlignment) decides with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.nrt import (
    Allocatable,
    ExclusiveUse,
    allocatable_from_podresources,
    build_nrt,
    exclusive_from_podresources,
)
from numa_align.nrt_cores import cpus_per_core
from numa_align.sysfs import HostTopology, read_sysfs

from tests.fakesysfs import write_node_tree

UID = "6f1c2b8e-0d5a-4c1e-9b7a-2f3e4d5c6b7a"


@pytest.fixture
def smt_host(make_sysfs: Callable[..., Path]) -> HostTopology:
    """2 cells x 2 cores x 2 threads numbered as QEMU does: cores 0,1 2,3 | 4,5 6,7."""
    return read_sysfs(make_sysfs({0: "0-3", 1: "4-7"}, threads_per_core=2))


def _pods(*held: list[int]) -> pb.ListPodResourcesResponse:
    return pb.ListPodResourcesResponse(pod_resources=[
        pb.PodResources(namespace="numa", name=f"p{i}", containers=[pb.ContainerResources(name="app", cpu_ids=cpus)])
        for i, cpus in enumerate(held)])


def _build(topology: HostTopology, listed: pb.ListPodResourcesResponse, reserved: tuple[int, ...] = (0,)) -> dict:
    """The object under the static CPU Manager policy with `reserved` CPUs left out of GetAllocatableResources."""
    allocatable = pb.AllocatableResourcesResponse(cpu_ids=[c for c in topology.cpus if c not in reserved])
    return build_nrt("w", UID, topology, allocatable_from_podresources(allocatable, topology),
                     exclusive_from_podresources(listed, topology), "single-numa-node", "container", None)


def _zone_attributes(nrt: dict) -> dict[str, dict[str, str]]:
    return {z["name"]: {a["name"]: a["value"] for a in z.get("attributes", [])} for z in nrt["zones"]}


def test_cpus_per_core_on_the_object(smt_host, tmp_path):
    """topology.CPUsPerCore: online CPUs over cores; 1 on a host without SMT."""
    nrt = _build(smt_host, _pods())
    assert {"name": "cpusPerCore", "value": "2"} in nrt["attributes"]
    assert cpus_per_core(read_sysfs(write_node_tree(tmp_path / "nosmt", {0: "0-1", 1: "2-3"}))) == 1


def test_one_thread_held_makes_its_core_not_free(smt_host):
    """enforceSMTAlignment's GetAvailablePhysicalCPUs (the default set less every sibling of a reserved CPU) and
    takeByTopologyNUMAPacked's whole free cores: CPU 0 reserved takes core 0,1 out of both counts; a pod holding
    CPU 6 leaves its sibling 7 free but not its core."""
    assert _zone_attributes(_build(smt_host, _pods())) == {
        "node-0": {"availablePhysicalCpus": "2", "freeCores": "1"},
        "node-1": {"availablePhysicalCpus": "4", "freeCores": "2"},
    }
    held = _build(smt_host, _pods([6]))
    assert _zone_attributes(held)["node-1"] == {"availablePhysicalCpus": "3", "freeCores": "1"}
    zone = held["zones"][1]
    assert list(zone) == ["name", "type", "costs", "attributes", "resources"]  # v1alpha2 Zone's field order


def test_intel_numbering_siblings_n_and_n_plus_4(make_sysfs):
    """Siblings far apart (Intel: N and N+cores), no CPU reserved: each held thread spoils one core."""
    host = read_sysfs(make_sysfs({0: "0-1,4-5", 1: "2-3,6-7"}, cores=["0,4", "1,5", "2,6", "3,7"]))
    attributes = _zone_attributes(_build(host, _pods([0, 1], [2]), reserved=()))
    assert attributes == {"node-0": {"availablePhysicalCpus": "2", "freeCores": "0"},
                          "node-1": {"availablePhysicalCpus": "3", "freeCores": "1"}}


def test_attributes_are_deterministic(smt_host):
    """The object is written only when it changed (nrt_writer.py): the same holdings listed in another order,
    or held by other pods, give an equal object."""
    one = _build(smt_host, _pods([6], [2, 3]))
    assert _build(smt_host, _pods([3, 2], [6])) == one
    assert _build(smt_host, _pods([2, 3, 6])) == one
    assert _build(smt_host, _pods([2, 3, 7])) == one  # the other thread of the same core: the same counts
    assert _build(smt_host, _pods([2, 3, 6, 7])) != one


def test_cpu_ids_unknown_publish_no_zone_attributes(smt_host):
    """Counts without CPU ids (quantities built by hand) cannot say which cores are free: nothing is guessed."""
    nrt = build_nrt("w", UID, smt_host, Allocatable({0: {"cpu": 4}, 1: {"cpu": 4}}),
                    ExclusiveUse({1: {"cpu": 1}}), "none", "container", None)
    assert all("attributes" not in zone for zone in nrt["zones"])
    assert {"name": "cpusPerCore", "value": "2"} in nrt["attributes"]
