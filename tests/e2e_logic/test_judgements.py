"""Expected-vs-seen judgements of a container's placement."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from numalab.model.errors import ValidationError
from numalab.placement.api_objects import judge_exhaustion, kubelet_policies, numa_align_allocatable, ready_since
from numalab.placement.probe import ProbeReport
from numalab.placement.verdicts import judge_exclusive, judge_pinned, judge_shared

R1 = "numa-align/numa-1"
NODES = {0: frozenset({0, 1, 2, 3}), 1: frozenset({4, 5, 6, 7})}


def seen(cpus, mems, numa_node=None, nodes=NODES):
    return ProbeReport(frozenset(cpus), frozenset(mems), numa_node, nodes)


def test_pinned_container_on_its_node_passes():
    verdict = judge_pinned(seen({5}, {1}, 1), node=1, count=1, memory_static=True)
    assert verdict.ok, verdict.problems
    assert (verdict.cpus, verdict.mems) == ("5", "1")


def test_cpu_outside_the_node_fails_and_names_it():
    verdict = judge_pinned(seen({3, 4}, {1}, 1), node=1, count=2, memory_static=True)
    assert not verdict.ok
    assert verdict.problems == ("cpus 3-4 are not all on node 1 (4-7): 3 outside",)


def test_wrong_cpu_count_fails():
    verdict = judge_pinned(seen({4, 5}, {1}, 1), node=1, count=1, memory_static=False)
    assert verdict.problems == ("2 cpus allowed, expected exactly 1 exclusive",)


def test_mems_are_judged_only_with_static_memory_manager():
    report = seen({4}, {0, 1}, 1)
    assert judge_pinned(report, node=1, count=1, memory_static=False).ok
    verdict = judge_pinned(report, node=1, count=1, memory_static=True)
    assert verdict.problems == ("mems 0-1, expected 1 (Memory Manager Static)",)


def test_numa_node_env_must_name_the_node():
    assert judge_pinned(seen({4}, {1}, 0), 1, 1, True).problems == ("NUMA_NODE is 0, expected 1",)
    assert judge_pinned(seen({4}, {1}, None), 1, 1, True).problems == ("NUMA_NODE is unset, expected 1",)


def test_node_the_container_cannot_see_fails_at_once():
    verdict = judge_pinned(seen({4}, {1}, 2), node=2, count=1, memory_static=True)
    assert verdict.problems == ("node 2 is not in the container's view of NUMA nodes (0-1)",)


def test_shared_pool_container_passes_only_with_the_whole_pool():
    pool = frozenset({0, 1, 2, 3, 6, 7})
    assert judge_shared(seen(pool, {0, 1}), pool).ok
    verdict = judge_shared(seen({6}, {1}), pool)
    assert verdict.problems == ("cpus 6, expected the shared pool 0-3,6-7", "mems 1, expected every node 0-1")


def test_exclusive_sidecar_is_one_node_and_apart_from_its_neighbours():
    assert judge_exclusive(seen({2}, {0, 1}), 1, disjoint_from=frozenset({5})).ok
    assert judge_exclusive(seen({5}, {1}), 1, disjoint_from=frozenset({5})).problems == (
        "cpus 5 are also another container's",
    )
    assert judge_exclusive(seen({3, 4}, {0, 1}), 2).problems == ("cpus 3-4 span nodes 0-1",)
    verdict = judge_exclusive(seen({0, 1, 2}, {0}), 2)
    assert verdict.problems == ("3 cpus allowed, expected exactly 2 exclusive",)


def test_exhaustion_in_slot_mode_needs_a_topology_affinity_rejection():
    rejected = {"status": {"phase": "Failed", "reason": "TopologyAffinityError",
                           "message": "Resources cannot be allocated with Topology locality"}}
    assert judge_exhaustion(rejected, "slots", R1) == (
        True, "rejected: TopologyAffinityError Resources cannot be allocated with Topology locality")
    assert judge_exhaustion({"status": {"phase": "Failed", "reason": "OutOfcpu"}}, "slots", R1) == (
        False, "Failed for another reason: OutOfcpu")
    assert judge_exhaustion({"status": {"phase": "Pending"}}, "slots", R1) == (None, "Pending, not yet rejected")
    assert judge_exhaustion({"status": {"phase": "Running"}}, "slots", R1)[0] is False
    unschedulable = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient numa-align/numa-1."}]}}
    assert judge_exhaustion(unschedulable, "slots", R1)[0] is False


def test_exhaustion_in_cpus_mode_needs_the_scheduler_to_refuse():
    short_of_cpu = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient cpu."}]}}
    assert judge_exhaustion(short_of_cpu, "cpus", R1) == (
        False, "Unschedulable, but not for lack of numa-align/numa-1: 0/3 nodes are available: 3 Insufficient cpu.")
    unschedulable = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient numa-align/numa-1."}]}}
    assert judge_exhaustion(unschedulable, "cpus", R1) == (
        True, "Pending, Unschedulable: 0/3 nodes are available: 3 Insufficient numa-align/numa-1.")
    assert judge_exhaustion({"status": {"phase": "Pending"}}, "cpus", R1)[0] is None
    failed = {"status": {"phase": "Failed", "reason": "TopologyAffinityError"}}
    assert judge_exhaustion(failed, "cpus", R1) == (
        False, "Failed (TopologyAffinityError); expected to stay Pending unschedulable")


def test_numa_align_allocatable_and_kubelet_policies():
    allocatable = {"cpu": "4", "memory": "3Gi", "numa-align/numa-0": "100", "numa-align/numa-1": "0"}
    assert numa_align_allocatable(allocatable) == {0: 100, 1: 0}
    configz = {"kubeletconfig": {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
                                 "topologyManagerPolicy": "single-numa-node"}}
    assert kubelet_policies(configz) == {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
                                         "topologyManagerPolicy": "single-numa-node",
                                         "topologyManagerScope": "container"}
    assert kubelet_policies({"kubeletconfig": {}})["cpuManagerPolicy"] == "none"
    with pytest.raises(ValidationError, match="configz.kubeletconfig"):
        kubelet_policies({})


def test_ready_since_needs_a_fresh_ready_heartbeat():
    restart = datetime(2026, 11, 22, 19, 0, 0, tzinfo=UTC).timestamp()

    def node(status, beat):
        return {"status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                          {"type": "Ready", "status": status, "lastHeartbeatTime": beat}]}}

    assert ready_since(node("True", "2026-11-22T19:00:05Z"), restart)
    assert ready_since(node("True", "2026-11-22T19:00:05+00:00"), restart)
    assert not ready_since(node("True", "2026-11-22T18:59:55Z"), restart)
    assert not ready_since(node("False", "2026-11-22T19:00:05Z"), restart)
    assert not ready_since({"status": {}}, restart)


def test_mems_are_reported_as_not_enforced_unless_the_memory_manager_is_static() -> None:
    from numalab.placement.verdicts import memory_not_enforced

    assert memory_not_enforced("Static") == ""
    assert memory_not_enforced("None") == "mems not enforced by this kubelet (memoryManagerPolicy None)"

