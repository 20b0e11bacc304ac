"""explain under the CPU Manager's full-pcpus-only option on an SMT node (2 threads per core), from numa-align's
cpusPerCore and per-cell availablePhysicalCpus/freeCores, against k8s.io/kubernetes v1.36.3 pkg/kubelet/cm."""

import json

from numalab.explain.verdicts import explain
from tests.explain.cluster import cell, configz, container, node, nrt, pod

SMT = "SMTAlignmentError: SMT Alignment Error: "
TAE = "TopologyAffinityError: Resources cannot be allocated with Topology locality"
FULL = {"full-pcpus-only": "true"}


def judge(the_pod, zones, config=None, **attributes):
    """Each cell 4 CPUs = 2 cores x 2 threads; memory not managed (Memory Manager None)."""
    obj = nrt("w", zones, "single-numa-node", "container", **{"cpusPerCore": "2", **attributes})
    configs = {"w": configz(memory="None", cpu_options=FULL) if config is None else config}
    (verdict,) = explain(the_pod, [obj], [node("w")], [], kubelet_configs=configs)
    return verdict


def whole_cells():
    return [cell(0, (4, 4, 4), costs=[10, 20], cores=(4, 2)), cell(1, (4, 4, 4), costs=[20, 10], cores=(4, 2))]


def test_one_cpu_pod_rejected_with_smt_alignment_error():
    """cpumanager staticPolicy.Allocate -> enforceSMTAlignment: 1 CPU is not a multiple of 2 CPUs per core; the
    error's own Type() is the reason (cm/admission GetPodAdmitResult)."""
    verdict = judge(pod(container("a", cpu="1")), whole_cells())
    assert (verdict.verdict, verdict.reason) == ("rejected", SMT + "requested 1 cpus not multiple cpus per core = 2")


def test_two_cpu_pod_admitted_on_the_cell_with_a_free_whole_core():
    """generateCPUTopologyHints + enforceSMTAlignment: cell 0 (CPU 0 reserved, 2,3 held) has 1 free CPU, cell 1
    (6 held) 3 free CPUs of which 3 outside reserved cores and one free whole core: cell 1, whole cores."""
    zones = [cell(0, (4, 3, 1), costs=[10, 20], cores=(0, 0)), cell(1, (4, 4, 3), costs=[20, 10], cores=(3, 1))]
    verdict = judge(pod(container("a")), zones)
    assert (verdict.verdict, verdict.cells) == ("admitted", {"cpu": [1]})
    assert verdict.hints["a: cpu"] == [{"cells": [1], "preferred": True}, {"cells": [0, 1], "preferred": False}]
    assert not any("whole cores" in note for note in verdict.notes)


def test_topology_manager_rejects_before_the_smt_check():
    """scope_container.go Admit: calculateAffinity (TopologyAffinityError) runs before allocateAlignedResources
    (where enforceSMTAlignment is): 3 CPUs fit no single cell, so the reason is not SMTAlignmentError."""
    verdict = judge(pod(container("a", cpu="3")), [cell(0, (4, 4, 2), cores=(2, 1)), cell(1, (4, 4, 2), cores=(2, 1))])
    assert (verdict.verdict, verdict.reason) == ("rejected", TAE)


def test_free_threads_of_partly_held_cores_still_admit_as_the_kubelet_does():
    """generateCPUTopologyHints counts free CPUs, not cores, and enforceSMTAlignment only the node's free CPUs
    outside reserved cores (GetAvailablePhysicalCPUs): with one thread of every core held, a 2-CPU pod is
    admitted on cell 0 (takeByTopologyNUMAPacked then takes two threads of different cores), and explain says so."""
    zones = [cell(0, (4, 4, 2), costs=[10, 20], cores=(2, 0)), cell(1, (4, 4, 2), costs=[20, 10], cores=(2, 0))]
    verdict = judge(pod(container("a")), zones)
    assert (verdict.verdict, verdict.cells) == ("admitted", {"cpu": [0]})
    assert any("cell(s) 0 lack free whole cores" in note for note in verdict.notes)


def test_free_cpus_beside_reserved_ones_do_not_count():
    """enforceSMTAlignment's second check: cell 0 has 2 free CPUs (the topology manager admits it), but one is the
    sibling of reserved CPU 0, so the node has 1 available physical CPU for a 2-CPU request."""
    zones = [cell(0, (4, 3, 2), costs=[10, 20], cores=(1, 0)), cell(1, (4, 4, 0), costs=[20, 10], cores=(0, 0))]
    verdict = judge(pod(container("a")), zones)
    assert verdict.verdict == "rejected"
    assert verdict.reason == SMT + ("not enough free physical CPUs: available physical CPUs = 1, requested CPUs = 2, "
                                    "CPUs per core = 2")


def test_object_without_whole_core_attributes_cannot_be_judged():
    """enforceSMTAlignment needs CPUs per core and the physical CPUs; an older numa-align's object has neither."""
    obj = nrt("w", [cell(0, (4, 4, 4)), cell(1, (4, 4, 4))])
    (verdict,) = explain(pod(container("a")), [obj], [node("w")], [],
                         kubelet_configs={"w": configz(memory="None", cpu_options=FULL)})
    assert verdict.verdict == "cannot-judge"
    assert "cpusPerCore" in verdict.reason


def test_manager_settings_from_the_object_are_preferred_to_configz():
    """The CPU Manager's options decide whether enforceSMTAlignment runs (NewStaticPolicyOptions): published on
    the object they are used without /configz, and over it; a malformed option map falls back to /configz."""
    published = {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": json.dumps(FULL),
                 "memoryManagerPolicy": "None", "topologyManagerPolicyOptions": "{}"}
    obj = nrt("w", whole_cells(), cpusPerCore="2", **published)
    one_cpu = pod(container("a", cpu="1"))
    (alone,) = explain(one_cpu, [obj], [node("w")], [], kubelet_configs={"w": None})
    assert alone.reason == SMT + "requested 1 cpus not multiple cpus per core = 2"
    assert not any("/configz" in note for note in alone.notes)
    over = judge(one_cpu, whole_cells(), configz(memory="None"), **published)
    assert over.reason == SMT + "requested 1 cpus not multiple cpus per core = 2"
    bad = judge(one_cpu, whole_cells(), configz(memory="None"), **{**published, "cpuManagerPolicyOptions": "x"})
    assert bad.verdict == "admitted"
    assert any("cpuManagerPolicyOptions is not a JSON object" in note for note in bad.notes)
