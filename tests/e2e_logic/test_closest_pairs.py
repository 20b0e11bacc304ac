"""Case 8's closest- pairs (e2e/closest_pairs.py) on a fake of the 4-cell worker the cluster test makes of
worker-1: restricted + prefer-closest-numa-nodes, scope pod, static CPU Manager, Memory Manager None; one online
CPU per cell (cell 0's reserved), distances with cells 2 and 3 close. Expectations worked out by hand from the
kubelet's rules (k8s.io/kubernetes v1.36.3: cpumanager generateCPUTopologyHints, topologymanager Closest and
Narrowest, policy_restricted.go)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from numalab.explain.requests import pod_request
from numalab.explain.verdicts import explain
from tests.e2e_logic.conftest import load_e2e_module
from tests.e2e_logic.test_e2e_entry import run_e2e
from tests.e2e_logic.test_explain_corpus import MI, WORKERS, Outcome, corpus_module, lab_corpus, objects, word
from tests.explain.cluster import container, pod

closest = load_e2e_module("closest_pairs")
assert closest is sys.modules["closest_pairs"]  # the module explain_corpus imported

DISTANCES = [[10, 20, 30, 30], [20, 10, 30, 30], [30, 30, 10, 12], [30, 30, 12, 10]]
FOUR = {"unit": 1, "options": {}, "node_cpu": "3", "policy": "restricted", "memory_policy": "None",
        "topology_options": {"prefer-closest-numa-nodes": "true"}, "distances": DISTANCES,
        "cells": [(0, 1, 0, 400 * MI, 0), (1, 1, 1, 400 * MI, 0), (2, 1, 1, 400 * MI, 0), (3, 1, 1, 400 * MI, 0)]}
IMAGE = "registry:5000/numa-lab/probe:1"


def four_corpus(spec: dict = FOUR, **config_changes: object) -> list:
    obj, the_node, _, config = objects("worker-1", shape=spec)
    shape = corpus_module.worker_shape("worker-1", obj, the_node, {**config, **config_changes}, 1, "slots")
    return corpus_module.corpus(shape, IMAGE)


def closest_of(pairs: list) -> dict:
    return {p.name: p for p in pairs if p.name.startswith("closest-")}


def cpu(*cells: int) -> Outcome:
    return Outcome("admitted", cells={"cpu": list(cells)})


def test_the_4_cell_worker_gets_the_closest_pairs_with_expect_and_baseline_by_hand() -> None:
    pairs = closest_of(four_corpus())
    # 2 CPUs: no cell holds 2; free pairs {1,2}, {1,3}, {2,3}, average distances 20, 20, 11
    assert pairs["closest-pair"].expect == cpu(2, 3) and pairs["closest-pair"].baseline == cpu(1, 2)
    # the filler takes cell 2 (lower of 2,3; taking 3 tells the option apart no better): only {1,3} is left
    after = pairs["closest-pair-after-filler"]
    assert [(f["spec"]["containers"][0]["resources"]["limits"]["cpu"], *f["spec"]["containers"][0]["resources"]
             ["limits"]) for f in after.fillers] == [("1", "cpu", "memory", "numa-align/numa-2")]
    assert after.expect == cpu(1, 3) and after.baseline == cpu(1, 3)
    # 3 CPUs: no two cells hold 3; {1,2,3} is the only 3-cell mask with 3 free (cell 0's CPU is reserved)
    assert pairs["closest-three-cells"].expect == cpu(1, 2, 3) == pairs["closest-three-cells"].baseline
    for pair in pairs.values():
        (app,) = pair.pod["spec"]["containers"]
        assert app["resources"]["limits"]["cpu"] == str(sum(map(len, pair.expect.cells.values())))
        assert pair.holds and pair.pod["spec"]["nodeName"] == "worker-1"


def test_on_that_worker_no_pair_carries_a_single_numa_node_expectation() -> None:
    pairs = four_corpus()
    assert len(closest_of(pairs)) == 3
    assert all(p.expect is None and p.baseline is None for p in pairs if not p.name.startswith("closest-"))


@pytest.mark.parametrize("changes", [
    {"topologyManagerPolicyOptions": {}},
    {"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "false"}},
    {"topologyManagerPolicy": "single-numa-node"},
    {"topologyManagerPolicy": "none"},
    {"cpuManagerPolicy": "none"},
    {"memoryManagerPolicy": "Static"},
])
def test_no_closest_pairs_without_every_condition(changes: dict) -> None:
    assert not closest_of(four_corpus(**changes))


def test_best_effort_gets_them_too() -> None:
    pairs = closest_of(four_corpus(topologyManagerPolicy="best-effort"))
    assert pairs["closest-pair"].expect == cpu(2, 3) and pairs["closest-pair"].baseline == cpu(1, 2)


def test_no_closest_pairs_with_equal_distances_or_fewer_than_3_free_cells() -> None:
    assert not closest_of(four_corpus({**FOUR, "distances": None}))
    two_free = {**FOUR, "cells": [(0, 1, 0, 400 * MI, 0), (1, 1, 0, 400 * MI, 0), *FOUR["cells"][2:]]}
    assert not closest_of(four_corpus(two_free))


@pytest.mark.parametrize("worker", WORKERS)
def test_no_closest_pairs_for_todays_lab_workers(worker: str) -> None:
    assert not closest_of(lab_corpus(worker))
    options = {"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}}
    assert not closest_of(lab_corpus(worker, **options))  # single-numa-node ignores the option
    assert not closest_of(lab_corpus(worker, topologyManagerPolicy="restricted", memoryManagerPolicy="None",
                                     **options))  # fewer than 3 cells with free CPUs


def test_under_scope_container_two_one_cpu_containers_take_a_cell_each_not_the_closest_pair() -> None:
    pairs = closest_of(four_corpus({**FOUR, "scope": "container"}))
    # container a: the one-cell masks {1}, {2}, {3} tie (distance 10 each): the lowest, 1; then b: 2. Under
    # scope pod their 2 CPUs together take the closest pair, 2 and 3.
    both = pairs["closest-containers"]
    assert both.expect == cpu(1, 2) and both.baseline == cpu(2, 3)
    assert both.baseline_is == "under topology-manager-scope pod"
    assert [c["resources"]["limits"]["cpu"] for c in both.pod["spec"]["containers"]] == ["1", "1"]
    assert pairs["closest-pair"].expect == cpu(2, 3)  # one container: the same as under scope pod
    assert "closest-containers" not in closest_of(four_corpus())  # scope pod: no such pair
    ok, note = closest.against_baseline(both.expect, both.baseline, cpu(2, 3), both.baseline_is)
    assert not ok and "the setting had no effect; under topology-manager-scope pod: cpu 2,3" in note


@pytest.mark.parametrize(("policy", "scope", "count"), [
    ("restricted", "pod", 3), ("best-effort", "pod", 3), ("restricted", "container", 4)])
def test_explain_gives_every_closest_pair_its_expected_outcome(policy: str, scope: str, count: int) -> None:
    spec = {**FOUR, "policy": policy, "scope": scope}
    pairs = closest_of(four_corpus(spec))
    assert len(pairs) == count
    for pair in pairs.values():
        obj, the_node, pods, config = objects("worker-1", pair.fillers, spec)
        (verdict,) = explain(pod_request(pair.pod, pair.name), [obj], [the_node], pods,
                             kubelet_configs={"worker-1": config}, only="worker-1")
        admitted = verdict.verdict == "admitted"
        got = (verdict.verdict, "" if admitted else word(verdict.reason), verdict.cells if admitted else {})
        assert got == (pair.expect.verdict, pair.expect.reason, dict(pair.expect.cells)), pair.name


def test_the_rule_rejects_under_restricted_when_no_preferred_mask_is_free() -> None:
    obj, the_node, _, config = objects("worker-1", shape=FOUR)
    shape = corpus_module.worker_shape("worker-1", obj, the_node, config, 1, "slots")
    assert closest.cpu_outcome(shape.minus(3, 1, 0), 3, True) == Outcome("rejected", "TopologyAffinityError")
    best_effort = corpus_module.worker_shape("worker-1", obj, the_node, {**config, "topologyManagerPolicy":
                                                                          "best-effort"}, 1, "slots")
    assert closest.cpu_outcome(best_effort.minus(3, 1, 0), 3, True) is None  # not modelled: no pair made


def test_a_hints_width_counts_every_online_cpu_of_its_cells_not_only_the_free_ones() -> None:
    """Two CPUs per cell, one free in each: a 2-CPU pod's preferred width is one cell (capacity), none is free."""
    spec = {**FOUR, "node_cpu": "7", "cells": [(c, 2, 2 - (c == 0), 400 * MI, 0) for c in range(4)]}
    obj, the_node, _, config = objects("worker-1", shape=spec)
    for zone in obj["zones"]:  # one CPU of each cell is held by a pod already
        zone["resources"][0]["available"] = "1" if zone["name"] != "node-0" else "0"
    shape = corpus_module.worker_shape("worker-1", obj, the_node, config, 1, "slots")
    assert closest.cpu_outcome(shape, 2, True) == Outcome("rejected", "TopologyAffinityError")
    (verdict,) = explain(pod(container("app", cpu="2", memory="32Mi")), [obj], [the_node], [],
                         kubelet_configs={"worker-1": config}, only="worker-1")
    assert (verdict.verdict, word(verdict.reason)) == ("rejected", "TopologyAffinityError")


def test_a_row_ends_with_the_baseline_and_fails_when_the_kubelet_gave_it_instead() -> None:
    assert closest.against_baseline(cpu(2, 3), cpu(1, 2), cpu(2, 3)) == (
        True, "; without prefer-closest-numa-nodes: cpu 1,2")
    ok, note = closest.against_baseline(cpu(2, 3), cpu(1, 2), cpu(1, 2))
    assert not ok and note.endswith("; without prefer-closest-numa-nodes: cpu 1,2")
    assert "not the expected cpu 2,3: the setting had no effect" in note
    assert closest.against_baseline(cpu(1, 3), cpu(1, 3), cpu(1, 3))[0]  # nothing to tell apart: no verdict
    assert closest.against_baseline(cpu(2, 3), cpu(1, 2), Outcome("rejected", "TopologyAffinityError"))[0]
    rejected = Outcome("rejected", "TopologyAffinityError")
    assert closest.against_baseline(rejected, rejected, rejected) == (
        True, "; without prefer-closest-numa-nodes: rejected TopologyAffinityError")


def test_explain_pairs_closest_keeps_only_closest_pairs_and_fails_when_no_worker_has_one() -> None:
    everything = four_corpus()
    assert closest.selected(everything, "all") == everything
    assert [p.name for p in closest.selected(everything, "closest")] == [
        "closest-pair", "closest-pair-after-filler", "closest-three-cells"]
    plain = closest.selected(lab_corpus("worker-1"), "closest")
    assert plain == [] and closest.none_to_run([plain, []], "closest") == closest.NONE_RUN
    assert closest.none_to_run([plain, closest.selected(everything, "closest")], "closest") is None
    assert closest.none_to_run([[]], "all") is None


def test_the_e2e_suite_takes_the_explain_pairs_option(tmp_path) -> None:
    absent = str(tmp_path / "absent")
    assert run_e2e("--collect-only", "-q", "--kubeconfig", absent, "--explain-pairs", "closest").returncode == 0
    wrong = run_e2e("--collect-only", "-q", "--kubeconfig", absent, "--explain-pairs", "some")
    assert wrong.returncode == 4 and "invalid choice: 'some'" in wrong.stderr


class _Options:
    """Stands for pytest's parser: collects each option's default under its dest."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {"ssh_config": None}

    def getgroup(self, name: str) -> _Options:
        return self

    def addoption(self, flag: str, **kwargs: object) -> None:
        self.values[flag.removeprefix("--").replace("-", "_")] = kwargs.get("default")


def test_the_suites_settings_carry_the_explain_pairs_choice() -> None:
    for name in ("kube", "results", "inspect_retry"):
        sys.modules.setdefault(name, load_e2e_module(name))
    conftest = load_e2e_module("conftest")
    options = _Options()
    conftest.pytest_addoption(options)
    assert conftest._settings(SimpleNamespace(option=SimpleNamespace(**options.values))).explain_pairs == "all"
    chosen = SimpleNamespace(**{**options.values, "explain_pairs": "closest"})
    assert conftest._settings(SimpleNamespace(option=chosen)).explain_pairs == "closest"
