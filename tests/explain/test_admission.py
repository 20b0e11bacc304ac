"""explain's verdicts against the kubelet's rules (k8s.io/kubernetes v1.36.3 pkg/kubelet/cm), one rule a test."""

import pytest

from numalab.explain.verdicts import explain
from tests.explain.cluster import GI, MI, cell, configz, container, node, nrt, pod, res

TAE = "TopologyAffinityError: Resources cannot be allocated with Topology locality"


def judge(the_pod, zones, policy="single-numa-node", scope="container", memory="Static", topology_options=None,
          allocations=None, pods=(), **node_extra):
    obj = nrt("w", zones, policy, scope, allocations)
    config = configz(policy, scope, memory, topology_options=topology_options)
    (verdict,) = explain(the_pod, [obj], [node("w", **node_extra)], list(pods), kubelet_configs={"w": config})
    return verdict


def two_cells(free0=4, free1=4):
    return [cell(0, (4, 4, free0), costs=[10, 20]), cell(1, (4, 4, free1), costs=[20, 10])]


def test_two_cpu_pod_fits_cell_1_only():
    """cpumanager generateCPUTopologyHints: only cell 1 has 2 free CPUs, so its mask is the only one-cell hint."""
    verdict = judge(pod(container("a")), two_cells(free0=1, free1=3))
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == [1]
    assert verdict.hints["a: cpu"] == [{"cells": [1], "preferred": True}, {"cells": [0, 1], "preferred": False}]


def test_exhausted_cells_rejected_under_single_numa_node():
    """policy_single_numa_node.go filterSingleNumaHints: the only fitting mask spans two cells, so nothing is left."""
    verdict = judge(pod(container("a")), two_cells(free0=1, free1=1))
    assert verdict.verdict == "rejected"
    assert verdict.reason == TAE


def test_exhausted_cells_admitted_across_cells_under_best_effort():
    """policy_best_effort.go canAdmitPodResult: always admits, the not-preferred two-cell hint is used."""
    verdict = judge(pod(container("a")), two_cells(free0=1, free1=1), policy="best-effort")
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == [0, 1]


def test_restricted_rejects_a_split_it_could_avoid_and_admits_one_it_cannot():
    """policy_restricted.go canAdmitPodResult + generateCPUTopologyHints' minimal width: 2 CPUs fit one cell's
    capacity, so a split is not preferred (rejected); 6 CPUs need two cells, so the split is preferred."""
    split = judge(pod(container("a")), two_cells(free0=1, free1=1), policy="restricted")
    assert (split.verdict, split.reason) == ("rejected", TAE)
    wide = judge(pod(container("a", cpu="6")), two_cells(), policy="restricted", memory="None")
    assert wide.verdict == "admitted"
    assert wide.cells["cpu"] == [0, 1]


def test_three_uneven_cells_only_the_big_one_fits():
    """generateCPUTopologyHints over uneven cells: 5 CPUs fit only cell 2 (6 CPUs), a one-cell preferred hint."""
    zones = [cell(0, (2, 2, 2)), cell(1, (4, 4, 4)), cell(2, (6, 6, 6), memory=(16 * GI, 16 * GI, 16 * GI))]
    verdict = judge(pod(container("a", cpu="5")), zones, policy="restricted")
    assert verdict.verdict == "admitted"
    assert verdict.cells == {"cpu": [2], "memory": [2]}


def test_container_scope_places_two_containers_on_two_cells():
    """scope_container.go Admit: each container is merged and allocated alone, the second sees the first's CPUs gone."""
    verdict = judge(pod(container("a"), container("b")), two_cells(free0=2, free1=2))
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == [0, 1]
    assert verdict.hints["a: cpu"][0] == {"cells": [0], "preferred": True}
    assert verdict.hints["b: cpu"][0] == {"cells": [1], "preferred": True}


def test_pod_scope_sums_the_containers_and_rejects():
    """scope_pod.go + cpumanager podGuaranteedCPUs: 4 CPUs for the pod fit no single cell with 2 free."""
    verdict = judge(pod(container("a"), container("b")), two_cells(free0=2, free1=2), scope="pod")
    assert (verdict.verdict, verdict.reason) == ("rejected", TAE)
    assert verdict.hints["cpu"] == [{"cells": [0, 1], "preferred": False}]


def test_init_container_bigger_than_the_app_container_sets_the_pod_request():
    """cpumanager podGuaranteedCPUs / memorymanager getPodRequestedResources: max(init, sum of apps), not the sum:
    3 CPUs (the init container's) fit cell 1; 4 would not."""
    the_pod = pod(container("app", cpu="1"), init=(container("setup", cpu="3"),))
    verdict = judge(the_pod, two_cells(free0=2, free1=3), scope="pod")
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == [1]
    assert verdict.hints["cpu"][0] == {"cells": [1], "preferred": True}


def test_init_container_cpus_are_reused_by_the_app_container():
    """cpumanager updateCPUsToReuse: the app container's hints must contain the init container's cell
    (container scope)."""
    the_pod = pod(container("app", cpu="2"), init=(container("setup", cpu="2"),))
    verdict = judge(the_pod, two_cells(free0=2, free1=4))
    assert verdict.verdict == "admitted"
    assert verdict.hints["app: cpu"] == [{"cells": [0], "preferred": True}, {"cells": [0, 1], "preferred": False}]
    assert verdict.cells["cpu"] == [0]


def test_hugepages_2mi_follow_the_free_pages():
    """memorymanager calculateHints: memory and hugepages-2Mi share one mask; only cell 1 has free pages."""
    zones = [cell(0, (4, 4, 4), extra=[res("hugepages-2Mi", 128 * MI, 128 * MI, 0)]),
             cell(1, (4, 4, 4), extra=[res("hugepages-2Mi", 128 * MI, 128 * MI, 128 * MI)])]
    verdict = judge(pod(container("a", hugepages_2Mi="64Mi")), zones, **{"hugepages-2Mi": "256Mi"})
    assert verdict.verdict == "admitted"
    assert verdict.cells == {"cpu": [1], "memory": [1], "hugepages-2Mi": [1]}


def test_numa_align_device_forces_cell_1():
    """devicemanager generateDeviceTopologyHints: numa-align/numa-1 devices sit on cell 1 only; the merge ANDs it
    with the CPU hints, so the CPUs go there although cell 0 is free too."""
    zones = [cell(0, (4, 4, 4), extra=[res("numa-align/numa-0", 4, 4, 4)]),
             cell(1, (4, 4, 4), extra=[res("numa-align/numa-1", 4, 4, 4)])]
    verdict = judge(pod(container("a", numa_align__numa_1="1")), zones, **{"numa-align/numa-1": "4"})
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == [1]
    assert verdict.cells["numa-align/numa-1"] == [1]


def test_burstable_pod_gets_shared_cpus():
    """cpumanager guaranteedCPUs / memorymanager GetTopologyHints: not Guaranteed, no hints, no alignment."""
    spec = container("a")
    spec["resources"]["limits"] = {"cpu": "4", "memory": "2Gi"}
    verdict = judge(pod(spec), two_cells(free0=0, free1=0))
    assert verdict.verdict == "admitted"
    assert verdict.cells == {}
    assert any("Burstable pod: its containers run on the shared CPUs" in n for n in verdict.notes)


@pytest.mark.parametrize(("options", "pair"), [({"prefer-closest-numa-nodes": "true"}, [2, 3]), ({}, [0, 1])])
def test_restricted_prefer_closest_numa_nodes_picks_the_closest_pair(options, pair):
    """numa_info.go Closest (HintMerger with PreferClosestNUMA): among equally wide preferred masks the smallest
    average distance wins (cells 2,3 at 12); without the option the lowest-numbered pair does (Narrowest)."""
    far = 30
    distances = [[10, far, far, far], [far, 10, far, far], [far, far, 10, 12], [far, far, 12, 10]]
    zones = [cell(i, (4, 4, 4), costs=distances[i]) for i in range(4)]
    verdict = judge(pod(container("a", cpu="6")), zones, policy="restricted", memory="None",
                    topology_options=options)
    assert verdict.verdict == "admitted"
    assert verdict.cells["cpu"] == pair


def test_unknown_resource_is_named_not_judged():
    """No kubelet rule applies: a resource neither the Node nor any cell lists is named, never guessed."""
    verdict = judge(pod(container("a", **{"example.com/gpu": "1"})), two_cells())
    assert verdict.verdict == "cannot-judge"
    assert "example.com/gpu" in verdict.reason


def test_node_without_its_kubelet_config_cannot_judge_exclusive_cpus():
    """The CPU Manager policy decides whether GetTopologyHints gives hints at all; unknown, it is not guessed."""
    (verdict,) = explain(pod(container("a")), [nrt("w", two_cells())], [node("w")], [])
    assert verdict.verdict == "cannot-judge"
    assert "CPU Manager policy is unknown" in verdict.reason


def test_node_level_fit_after_alignment():
    """lifecycle/predicate.go: OutOfcpu with the kubelet's message when the node's pods leave too little."""
    running = {"metadata": {"namespace": "d", "name": "big"}, "spec": {"nodeName": "w", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "7"}}}]}, "status": {"phase": "Running"}}
    verdict = judge(pod(container("a")), two_cells(), pods=[running], cpu="8")
    assert verdict.verdict == "rejected"
    assert verdict.reason == ("OutOfcpu: Node didn't have enough resource: cpu, requested: 2000, used: 7000, "
                              "capacity: 8000")


def test_pod_wider_than_any_cell_rejected_under_single_numa_node():
    """policy_single_numa_node.go filterSingleNumaHints: 6 CPUs make the two-cell mask preferred for the CPU
    Manager, but single-numa-node drops every multi-cell hint, so nothing is left to admit."""
    verdict = judge(pod(container("a", cpu="6")), two_cells(), memory="None")
    assert (verdict.verdict, verdict.reason) == ("rejected", TAE)
    assert verdict.hints["a: cpu"] == [{"cells": [0, 1], "preferred": True}]


def test_numa_align_device_exhausted_rejects():
    """devicemanager GetTopologyHints: fewer available devices than requested gives an empty hint list (no
    possible affinity), which single-numa-node cannot admit."""
    zones = [cell(0, (4, 4, 4), extra=[res("numa-align/numa-0", 4, 4, 4)]),
             cell(1, (4, 4, 4), extra=[res("numa-align/numa-1", 4, 4, 0)])]
    verdict = judge(pod(container("a", numa_align__numa_1="1")), zones, **{"numa-align/numa-1": "4"})
    assert (verdict.verdict, verdict.reason) == ("rejected", TAE)
    assert verdict.hints["a: numa-align/numa-1"] == []


def test_memory_group_rule_keeps_single_cell_memory_off_a_multi_cell_group():
    """memorymanager calculateHints (the single vs multi-NUMA group rule): cells 0 and 1 hold one pod's memory
    as a group, so neither takes single-cell memory; only the group itself is a (not preferred) hint."""
    wide = {"d/wide": {"cpus": "", "numa_nodes": [0, 1], "memory": {"0": GI, "1": GI}}}
    verdict = judge(pod(container("a")), two_cells(), allocations=wide)
    assert (verdict.verdict, verdict.reason) == ("rejected", TAE)
    assert verdict.hints["a: memory"] == [{"cells": [0, 1], "preferred": False}]
    assert any("d/wide holds memory on cells 0,1" in note for note in verdict.notes)
