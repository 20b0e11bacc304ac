"""A simulated node's Node and NodeResourceTopology object: the kubelet's numbers, numa-align's object, and what
explain and the NUMA-aware scheduler read back from it."""

import json

from numa_align.fingerprint import pod_fingerprint

from numalab.explain.node_state import node_state
from numalab.fleet.nodes import allocatable_answer, host_topology, node_object, nrt_object, stand_in_uid
from numalab.fleet.spec import resolve_shape
from numalab.model.topology import Topology
from numalab.sysfs import topology_from_host
from numalab.top.nrt import parse_nrt
from tests.fleet.pods import node

GI, MI = 2**30, 2**20


def test_host_topology_is_what_numa_aligns_reader_would_read():
    shape = resolve_shape("3cell-memonly-24")
    host = shape.host
    assert [n.id for n in host.memory_only_nodes] == [2]
    assert host.nodes[0].distances == (10, 21, 28) and host.nodes[2].distances == (28, 28, 10)
    assert host.nodes[0].hugepages == {2048: 512}
    assert topology_from_host(host, "test").cells == shape.topology.cells
    cells = [{"id": 0, "cpus": "0-3", "memory": "1Gi"}, {"id": 1, "cpus": "4-7", "memory": "1Gi"}]
    smt = host_topology(Topology.from_dict({"threads_per_core": 2, "cells": cells}))
    assert smt.cpus[5].core == {4, 5} and smt.cpus[5].node == 1 and smt.threads_per_core == 2


def test_node_object_carries_the_kubelets_capacity_and_allocatable():
    obj = node_object(node("2cell-smt-32", name="fleet-00007", index=7))
    assert obj["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert obj["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "2cell-smt-32"
    status = obj["status"]
    assert status["capacity"] == {"cpu": "32", "memory": "64Gi", "hugepages-2Mi": "4Gi", "pods": "110",
                                  "numa-align/numa-0": "100", "numa-align/numa-1": "100"}
    # reserved-cpus 0-1 replace kube+system-reserved cpu; memory: 64Gi - 4Gi pages - 512Mi - 512Mi - 100Mi
    assert status["allocatable"]["cpu"] == "30"
    assert status["allocatable"]["memory"] == f"{64 * 1024 - 4 * 1024 - 1124}Mi"
    assert status["addresses"][0] == {"type": "InternalIP", "address": "172.16.0.7"}


def test_numa_align_devices_follow_its_capacity_setting():
    """NUMA_CAPACITY=cpus: one device per CPU the kubelet does not reserve; memory-only cells advertise none."""
    allocatable = node_object(node("2cell-reserved-32"))["status"]["allocatable"]
    assert (allocatable["numa-align/numa-0"], allocatable["numa-align/numa-1"]) == ("15", "15")
    assert "numa-align/numa-2" not in node_object(node("3cell-memonly-24"))["status"]["allocatable"]


def test_allocatable_answer_is_the_kubelets_podresources():
    answer = allocatable_answer(resolve_shape("2cell-16"))
    assert list(answer.cpu_ids) == list(range(1, 16))
    memory = {(block.memory_type, block.topology.nodes[0].ID): block.size for block in answer.memory}
    assert memory[("memory", 0)] == 16 * GI - GI - 1124 * MI  # less the pages and the reserved-memory split
    assert memory[("memory", 1)] == 15 * GI and memory[("hugepages-2Mi", 1)] == GI
    assert {d.resource_name: len(d.device_ids) for d in answer.devices} == {"numa-align/numa-0": 100,
                                                                             "numa-align/numa-1": 100}


def test_nrt_parses_back_and_explain_sees_the_free_cells():
    desc = node("4cell-smt-64", cpu_manager_policy_options={"full-pcpus-only": "true"})
    obj = nrt_object(desc, stand_in_uid(desc.name))
    parsed = parse_nrt(obj)
    assert parsed.node == desc.name and not parsed.warnings
    assert parsed.attributes["topologyManagerPolicy"] == "single-numa-node"
    assert parsed.attributes["topologyManagerScope"] == "pod"
    assert parsed.attributes["cpusPerCore"] == "2"
    assert parsed.attributes["nodeTopologyPodsFingerprint"] == pod_fingerprint([])
    assert parsed.attributes["nodeTopologyPodsFingerprintMethod"] == "all"
    assert json.loads(parsed.attributes["cpuManagerPolicyOptions"]) == {"full-pcpus-only": "true"}
    state = node_state(parsed, node_object(desc), [], None)
    assert not state.notes
    assert [c.available["cpu"] for c in state.cells] == [12, 16, 16, 16]  # cores {0,1},{2,3} reserved
    assert [c.physical_cpus for c in state.cells] == [12, 16, 16, 16]
    assert [c.free_cores for c in state.cells] == [6, 8, 8, 8]
    assert state.cells[0].costs == {0: 10, 1: 11, 2: 21, 3: 21}
    assert state.settings.cpu_policy == "static" and state.settings.memory_policy == "Static"
    assert state.settings.cpu_option("full-pcpus-only") is True
    assert state.cpus_per_core == 2
    assert state.allocatable["cpu"] == 60_000 and state.allocatable["pods"] == 110


def test_memory_only_cell_lists_memory_and_no_cpu():
    desc = node("3cell-memonly-24")
    zones = {zone["name"]: {r["name"]: r for r in zone["resources"]} for zone in nrt_object(desc, "u")["zones"]}
    assert set(zones["node-2"]) == {"memory"}
    assert zones["node-2"]["memory"]["available"] == str(64 * GI)
    assert zones["node-1"]["cpu"]["allocatable"] == "12" and zones["node-0"]["cpu"]["allocatable"] == "11"


def test_owner_reference_names_the_nodes_uid():
    desc = node()
    obj = nrt_object(desc, "real-uid")
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": desc.name,
                                                   "uid": "real-uid"}]
    assert stand_in_uid(desc.name) == stand_in_uid(desc.name) != stand_in_uid("other")
