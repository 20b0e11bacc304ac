"""Case 8's pure parts (explain_corpus, kubelet_outcome): the explain-vs-kubelet corpus for the lab's two worker
shapes, the expected outcome of every pair by the kubelet's rules (k8s.io/kubernetes v1.36.3 pkg/kubelet/cm),
explain's agreement with it on fake API objects shaped like the workers, and how the kubelet's real outcome is
read and compared."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from numalab.explain.requests import pod_request
from numalab.explain.verdicts import explain
from numalab.top.nrt import parse_nrt
from tests.e2e_logic.conftest import load_e2e_module
from tests.explain.cluster import MI, configz, node, nrt, res

sys.modules.setdefault("probe_pods", load_e2e_module("probe_pods"))  # explain_corpus imports them as the suite does
outcome_module = sys.modules.setdefault("kubelet_outcome", load_e2e_module("kubelet_outcome"))
sys.modules.setdefault("closest_pairs", load_e2e_module("closest_pairs"))
corpus_module = load_e2e_module("explain_corpus")
sharing = load_e2e_module("pair_sharing")
share, SHARED = sharing.share, sharing.SHARED
Outcome = outcome_module.Outcome
HP = "hugepages-2Mi"
DEVICES = 100  # numa-align's slots per cell (NUMA_CAPACITY's default)

# (cell, CPUs, CPUs allocatable, memory allocatable, hugepages-2Mi): worker-1 reserves CPU 0 and its memory
# reservation sits in cell 0; worker-3 reserves the core {0,1}, has CPUs 6-7 offline and a memory-only cell 2.
WORKERS = {
    "worker-1": {"unit": 1, "options": {}, "node_cpu": "3",
                 "cells": [(0, 2, 1, 900 * MI, 0), (1, 2, 2, 1900 * MI, 0)]},
    "worker-3": {"unit": 2, "options": {"full-pcpus-only": "true"}, "node_cpu": "4",
                 "cells": [(0, 4, 2, 850 * MI, 64 * MI), (1, 2, 2, 1450 * MI, 0), (2, 0, 0, 480 * MI, 0)]},
}


def _filler_cells(fillers: tuple[dict, ...]) -> list[tuple[int, int, int, int]]:
    """(cell, CPUs, memory, devices) of each filler, read from its manifest."""
    found = []
    for body in fillers:
        (limits,) = [c["resources"]["limits"] for c in body["spec"]["containers"]]
        (device,) = [name for name in limits if name.startswith("numa-align/")]
        found.append((int(device.rsplit("-", 1)[1]), int(limits["cpu"]),
                      int(limits["memory"].removesuffix("Mi")) * MI, int(limits[device])))
    return found


def objects(worker: str, fillers: tuple[dict, ...] = (), shape: dict | None = None
            ) -> tuple[dict, dict, list[dict], dict]:
    """The worker's NRT object, Node, pods and /configz with the fillers admitted, as numa-align and the API
    would show them. shape: WORKERS' form (default the worker's), optionally with distances (rows by cell),
    policy, scope (default pod), memory_policy and topology_options; without the Static Memory Manager no memory
    is placed."""
    shape = shape or WORKERS[worker]
    policy, memory_policy = shape.get("policy", "single-numa-node"), shape.get("memory_policy", "Static")
    scope = shape.get("scope", "pod")
    distances = shape.get("distances")
    held: dict[int, tuple[int, int, int]] = {}
    for cell, *amounts in _filler_cells(fillers):
        held[cell] = tuple(a + b for a, b in zip(held.get(cell, (0, 0, 0)), amounts, strict=True))
    zones, ids = [], [c[0] for c in shape["cells"]]
    for cell, cpus, allocatable, memory, pages in shape["cells"]:
        took_cpus, took_memory, took_devices = held.get(cell, (0, 0, 0))
        took_memory *= memory_policy == "Static"
        resources = [res("memory", memory + 200 * MI, memory, memory - took_memory)]
        costs = distances[cell] if distances else [10 if i == cell else 20 for i in ids]
        zone: dict[str, Any] = {"name": f"node-{cell}", "type": "Node", "costs": [
            {"name": f"node-{i}", "value": cost} for i, cost in zip(ids, costs, strict=True)]}
        if cpus:
            free = allocatable - took_cpus
            resources = [res("cpu", cpus, allocatable, free), *resources,
                         res(f"numa-align/numa-{cell}", DEVICES, DEVICES, DEVICES - took_devices)]
            zone["attributes"] = [{"name": "availablePhysicalCpus", "value": str(free)},
                                  {"name": "freeCores", "value": str(free // shape["unit"])}]
        if pages:
            resources.append(res(HP, pages, pages, pages))
        zone["resources"] = resources
        zones.append(zone)
    allocations = {f"ns/{body['metadata']['name']}": {
        "cpus": "", "numa_nodes": [cell], "memory": {str(cell): memory} if memory_policy == "Static" else {},
        "devices": {f"numa-align/numa-{cell}": devices}}
        for body, (cell, _, memory, devices) in zip(fillers, _filler_cells(fillers), strict=True)}
    obj = nrt(worker, zones, policy, scope, allocations, cpusPerCore=str(shape["unit"]))
    devices = {f"numa-align/numa-{c[0]}": str(DEVICES) for c in shape["cells"] if c[1]}
    the_node = node(worker, cpu=shape["node_cpu"], memory=f"{sum(c[3] for c in shape['cells']) // MI}Mi",
                    **{HP: f"{sum(c[4] for c in shape['cells']) // MI}Mi", **devices})
    pods = [{**body, "metadata": {**body["metadata"], "namespace": "ns"}, "status": {"phase": "Running"}}
            for body in fillers]
    config = configz(policy, scope, memory_policy, cpu_options=shape["options"],
                     topology_options=shape.get("topology_options"))
    return obj, the_node, pods, config


def lab_corpus(worker: str, **config_changes: str) -> list:
    obj, the_node, _, config = objects(worker)
    shape = corpus_module.worker_shape(worker, obj, the_node, {**config, **config_changes}, WORKERS[worker]["unit"],
                                       "slots")
    return corpus_module.corpus(shape, "registry:5000/numa-lab/probe:1")


def pairs_of(worker: str) -> dict[str, Any]:
    return {pair.name: pair for pair in lab_corpus(worker)}


def word(reason: str) -> str:
    return reason.split(":", 1)[0]


KINDS = {"guaranteed-unit", "larger-than-any-cell", "burstable", "besteffort", "fractional-guaranteed",
         "init-container", "multi-container", "device-matching", "device-contradicting",
         "memory-larger-than-any-cell", "exhausted-cell-next", "exhausted-all"}


@pytest.mark.parametrize("worker", WORKERS)
def test_each_lab_worker_gets_at_least_15_pairs_of_every_kind(worker: str) -> None:
    pairs = pairs_of(worker)
    assert len(pairs) >= 15, sorted(pairs)
    assert KINDS <= set(pairs), KINDS - set(pairs)
    assert ("hugepages" if worker == "worker-3" else "hugepages-none") in pairs


def test_whole_core_pairs_only_where_full_pcpus_only_runs() -> None:
    assert {"whole-core-split", "whole-core-odd"} <= set(pairs_of("worker-3"))
    assert not {"whole-core-split", "whole-core-odd"} & set(pairs_of("worker-1"))
    assert "emptier-cell-cpus" in pairs_of("worker-1")  # cells of 1 and 2 CPUs; worker-3's are equal


# What the kubelet gives each pair, worked out by hand from its rules for the two shapes above.
EXPECTED = {
    "worker-1": {
        "guaranteed-unit": ("admitted", {"cpu": [0], "memory": [0]}),
        "emptier-cell-cpus": ("admitted", {"cpu": [1], "memory": [1]}),
        "larger-than-any-cell": ("rejected", "TopologyAffinityError"),  # 3 CPUs: cells of 1 and 2
        "burstable-over-node": ("rejected", "OutOfcpu"),
        "fractional-guaranteed": ("admitted", {"memory": [0]}),
        "init-container": ("admitted", {"cpu": [1], "memory": [1]}),  # max(init 2, app 1), not 3
        "multi-container": ("admitted", {"cpu": [1], "memory": [1]}),
        "device-matching": ("admitted", {"cpu": [1], "memory": [1], "numa-align/numa-1": [1]}),
        "device-contradicting": ("rejected", "TopologyAffinityError"),  # 2 CPUs fit cell 1, the device is cell 0's
        "memory-emptier-cell": ("admitted", {"cpu": [1], "memory": [1]}),
        "memory-larger-than-any-cell": ("rejected", "TopologyAffinityError"),
        "hugepages-none": ("rejected", "UnexpectedAdmissionError"),
        "burstable-device": ("admitted", {"numa-align/numa-1": [1]}),
        "exhausted-cell-next": ("admitted", {"cpu": [1], "memory": [1]}),
        "exhausted-all": ("rejected", "TopologyAffinityError"),
    },
    "worker-3": {
        "guaranteed-unit": ("admitted", {"cpu": [0], "memory": [0]}),
        "whole-core-split": ("rejected", "SMTAlignmentError"),
        "whole-core-odd": ("rejected", "TopologyAffinityError"),  # 3 CPUs fit no cell: before the SMT check
        "larger-than-any-cell": ("rejected", "TopologyAffinityError"),
        "init-container": ("admitted", {"cpu": [0], "memory": [0]}),  # max(2, 2), not 4
        "init-larger-than-any-cell": ("rejected", "TopologyAffinityError"),
        "multi-container": ("rejected", "TopologyAffinityError"),  # 2 + 2 CPUs under scope pod
        "multi-container-shared": ("admitted", {"cpu": [0], "memory": [0]}),
        "device-contradicting": ("rejected", "TopologyAffinityError"),
        "memory-emptier-cell": ("admitted", {"cpu": [1], "memory": [1]}),
        "hugepages": ("admitted", {"cpu": [0], "memory": [0], HP: [0]}),
        "hugepages-too-many": ("rejected", "UnexpectedAdmissionError"),
        "exhausted-cell-next": ("admitted", {"cpu": [1], "memory": [1]}),
        "exhausted-all": ("rejected", "TopologyAffinityError"),
    },
}


@pytest.mark.parametrize("worker", WORKERS)
def test_expectations_follow_the_kubelets_rules_for_the_lab_shapes(worker: str) -> None:
    pairs = pairs_of(worker)
    for name, (verdict, detail) in EXPECTED[worker].items():
        expect = pairs[name].expect
        assert expect.verdict == verdict, name
        assert (expect.reason if verdict == "rejected" else dict(expect.cells)) == detail, name
    for name in ("burstable", "besteffort"):
        assert pairs[name].expect == Outcome("admitted")


@pytest.mark.parametrize("worker", WORKERS)
def test_explain_gives_every_pair_its_expected_outcome_on_fakes_of_the_worker(worker: str) -> None:
    """explain on the worker's NRT object, Node, pods (the fillers) and /configz, as the e2e case reads them."""
    for pair in lab_corpus(worker):
        obj, the_node, pods, config = objects(worker, pair.fillers)
        (verdict,) = explain(pod_request(pair.pod, pair.name), [obj], [the_node], pods,
                             kubelet_configs={worker: config}, only=worker)
        assert verdict.verdict != "cannot-judge", (pair.name, verdict.reason)
        admitted = verdict.verdict == "admitted"  # a rejection's cells are what was taken before it failed
        got = (verdict.verdict, "" if admitted else word(verdict.reason), verdict.cells if admitted else {})
        assert got == (pair.expect.verdict, pair.expect.reason, dict(pair.expect.cells)), pair.name


def test_manifests_are_tiny_sleeping_pods_bound_to_their_worker() -> None:
    names = set()
    for worker in WORKERS:
        for pair in lab_corpus(worker):
            for body in (pair.pod, *pair.fillers):
                assert body["spec"]["nodeName"] == worker and "nodeSelector" not in body["spec"]
                names.add(body["metadata"]["name"])
                for container in body["spec"]["containers"] + body["spec"].get("initContainers", []):
                    assert container["command"][0] == "sleep", pair.name
                    memory = container["resources"]["requests"].get("memory", "16Mi")
                    if not pair.name.startswith("memory-"):
                        assert 16 <= int(memory.removesuffix("Mi")) <= 64, (pair.name, memory)
    assert len(names) == sum(len(p.fillers) + 1 for w in WORKERS for p in lab_corpus(w))  # unique pod names


def test_holds_says_which_pods_the_annotation_will_list() -> None:
    pairs = pairs_of("worker-1")
    assert {name for name, pair in pairs.items() if not pair.holds} == {"burstable", "besteffort",
                                                                         "burstable-over-node"}
    assert pairs["fractional-guaranteed"].holds and pairs["burstable-device"].holds


def test_no_expectation_is_written_for_rules_the_corpus_does_not_follow() -> None:
    assert all(pair.expect is None for pair in lab_corpus("worker-1", topologyManagerScope="container"))
    assert all(pair.expect is not None for pair in lab_corpus("worker-1"))


def failed(reason: str) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "reason": reason, "message": "Pod was rejected: ..."}}


def running(**status: Any) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "app"}], **status}}


CELL_CPUS = {0: frozenset({0, 1}), 1: frozenset({2, 3}), 2: frozenset()}


def annotation(**entry: Any) -> dict:
    obj = nrt("w", [], allocations={"ns/p": {"cpus": "", "numa_nodes": [], "memory": {}, "devices": {}, **entry}})
    return parse_nrt(obj).allocations


def test_real_outcome_reads_a_failed_pods_reason() -> None:
    assert outcome_module.real_outcome(failed("SMTAlignmentError"), None, CELL_CPUS) == Outcome(
        "rejected", "SMTAlignmentError")


def test_real_outcome_reads_the_cells_from_the_annotation() -> None:
    """A device name the plugin never registers (zero-padded numa-01) names no cell."""
    devices = {"numa-align/numa-1": 1, "numa-align/numa-01": 1, "gpu/x": 1}
    allocations = annotation(cpus="2-3", memory={"1": 33554432}, devices=devices)
    seen = outcome_module.real_outcome(running(), allocations, CELL_CPUS)
    assert seen == Outcome("admitted", cells={"cpu": [1], "memory": [1], "numa-align/numa-1": [1]})


def test_real_outcome_admitted_without_allocation_or_undecided() -> None:
    assert outcome_module.real_outcome(running(), annotation(cpus="1"), {}) == Outcome("admitted", cells={"cpu": []})
    other = {**running(), "metadata": {"name": "q", "namespace": "ns"}}
    assert outcome_module.real_outcome(other, annotation(cpus="1"), CELL_CPUS) == Outcome("admitted")
    init_only = {"metadata": {}, "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i"}]}}
    assert outcome_module.real_outcome(init_only, None, CELL_CPUS).verdict == "admitted"
    assert outcome_module.real_outcome({"status": {"phase": "Pending"}}, None, CELL_CPUS).verdict == "undecided"


ADMITTED = {"verdict": "admitted", "reason": "", "cells": {"cpu": [1], "memory": [1], HP: [1]}}


def test_compare_agrees_on_the_same_cells_and_leaves_hugepages_out() -> None:
    ok, detail = outcome_module.compare(ADMITTED, Outcome("admitted", cells={"cpu": [1], "memory": [1]}))
    assert ok
    assert detail == ("predicted admitted cpu 1, memory 1, kubelet admitted cpu 1, memory 1 (hugepages-2Mi not in "
                      "numa-align's annotation: not compared)")


def test_compare_flags_a_different_cell() -> None:
    ok, detail = outcome_module.compare(ADMITTED, Outcome("admitted", cells={"cpu": [0], "memory": [0]}))
    assert not ok
    assert detail.startswith("predicted admitted cpu 1, memory 1, kubelet admitted cpu 0, memory 0")
    assert not outcome_module.compare(ADMITTED, Outcome("admitted", cells={"memory": [1]}))[0]  # no pinned CPU


def test_compare_flags_a_different_reason_and_a_different_verdict() -> None:
    rejected = {"verdict": "rejected", "reason": "TopologyAffinityError: Resources cannot be allocated", "cells": {}}
    assert outcome_module.compare(rejected, Outcome("rejected", "TopologyAffinityError")) == (
        True, "predicted rejected TopologyAffinityError, kubelet rejected TopologyAffinityError")
    assert outcome_module.compare(rejected, Outcome("rejected", "OutOfcpu")) == (
        False, "predicted rejected TopologyAffinityError, kubelet rejected OutOfcpu")
    assert not outcome_module.compare(rejected, Outcome("admitted", cells={"cpu": [1]}))[0]
    assert not outcome_module.compare(ADMITTED, Outcome("rejected", "TopologyAffinityError"))[0]
    assert not outcome_module.compare(ADMITTED, Outcome("undecided", "phase Pending"))[0]


def test_compare_never_agrees_with_a_verdict_explain_could_not_give() -> None:
    cannot = {"verdict": "cannot-judge", "reason": "cannot judge: pod-level resources", "cells": {}}
    ok, detail = outcome_module.compare(cannot, Outcome("admitted"))
    assert not ok and detail.startswith("predicted cannot-judge cannot judge: pod-level resources")


def test_annotation_json_matches_what_numa_align_writes() -> None:
    """The fake annotation's form is numa-align's (numa_align.allocations.pod_allocations)."""
    obj, *_ = objects("worker-1", pairs_of("worker-1")["exhausted-cell-next"].fillers)
    (entry,) = json.loads(obj["metadata"]["annotations"]["numa-align/allocations"]).values()
    assert set(entry) == {"cpus", "numa_nodes", "memory", "devices"} and entry["numa_nodes"] == [0]


def test_pairs_judged_alike_everywhere_run_on_one_worker_and_the_sequences_even_out() -> None:
    plans = [lab_corpus(worker) for worker in WORKERS]
    shared = share(plans)
    names = [[p.name for p in pairs] for pairs in shared]
    for name in SHARED:
        assert sum(name in ours for ours in names) == 1, (name, names)
    for full, kept in zip(plans, names, strict=True):  # every shape-dependent pair still runs where it did
        assert [p.name for p in full if p.name not in SHARED] == [n for n in kept if n not in SHARED]
    assert [len(pairs) for pairs in shared] == [17, 17]  # from 19 and 21: the longer sequence is 4 pairs shorter
    assert sum(len(pairs) for pairs in shared) >= 30  # the corpus: at least 30 pairs
