"""Case 8's runner (e2e/test_8_explain_agreement.py) waiting on numa-align's allocations annotation: a pair's
fillers count only once the annotation gives them all their CPUs (an object written while the kubelet was still
allocating names a pod with its devices and none of its CPUs yet), and deleted pods only once they are gone."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tests.e2e_logic.conftest import load_e2e_module
from tests.explain.cluster import nrt

for _name in ("probe_pods", "kubelet_outcome", "closest_pairs", "explain_corpus", "kube", "nrt", "results",
              "pair_sharing"):
    sys.modules.setdefault(_name, load_e2e_module(_name))  # test_8 imports them as the suite does
corpus_module = sys.modules["explain_corpus"]
case = load_e2e_module("test_8_explain_agreement")


def listing(**pods: str) -> dict:
    """An NRT object whose annotation lists `pods` (name -> cpulist) in namespace ns."""
    return nrt("w", [], allocations={f"ns/{name}": {"cpus": cpus, "numa_nodes": [0], "memory": {},
                                                    "devices": {"numa-align/numa-0": 1}}
                                     for name, cpus in pods.items()})


def runner(objects: list[dict], monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a PairRunner
    monkeypatch.setattr(case.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(case.wait_agreeing.__globals__["time"], "sleep", lambda seconds: None)
    made = case.PairRunner(SimpleNamespace(namespace="ns", api=None), None, "w", {})
    reads = iter(objects)
    last = objects[-1]
    made.read = lambda: next(reads, last)
    return made


def test_a_filler_listed_without_its_cpus_is_waited_for(monkeypatch) -> None:
    made = runner([listing(fill=""), listing(fill=""), listing(fill="1-2")], monkeypatch)
    assert made.wait_listed(["fill"], (), cpus={"fill": 2}) == []
    assert made.read() == listing(fill="1-2")  # it read until the third object


def test_a_filler_never_given_its_cpus_is_named(monkeypatch) -> None:
    made = runner([listing(fill="")], monkeypatch)
    problems = made.wait_listed(["fill"], (), seconds=0.0, cpus={"fill": 2})
    assert problems == ["ns/fill listed with 0 of its 2 CPUs"]
    assert made.wait_listed(["fill"], (), seconds=0.0) == []  # without the count: listed is enough (the baseline)


def test_a_fillers_cpus_are_its_whole_cpu_limits() -> None:
    shape = corpus_module.Shape("w", (corpus_module.Cell(0, 2, 1 << 30, 0),), 1, True, 2, "slots", True)
    body = corpus_module._Builder(shape, "img").filler("p", 0, 0, 2)
    assert case.exclusive_cpus(body) == 2


def entry(cpus: str, memory: dict | None = None, devices: dict | None = None) -> dict:
    return nrt("w", [], allocations={"ns/pod": {"cpus": cpus, "numa_nodes": [1], "memory": memory or {},
                                                "devices": devices or {}}})


def test_an_admitted_pod_read_before_its_memory_is_waited_for_until_whole(monkeypatch) -> None:
    """r7: cpu 1 read twice alike without the memory the kubelet allocates last; it counts only once whole."""
    full = corpus_module.Held(1, True, frozenset())
    made = runner([entry("3"), entry("3"), entry("3", {"1": 33554432}), entry("3", {"1": 33554432})], monkeypatch)
    allocations, why = made.settled("pod", True, full)
    assert allocations["ns/pod"].memory == {1: 33554432} and why == ""
    made = runner([entry("3"), entry("3")], monkeypatch)  # the baseline: without `full` the partial entry counts
    assert made.settled("pod", True)[0]["ns/pod"].memory == {}


def test_what_a_whole_admission_holds_is_read_from_the_pair() -> None:
    shape = corpus_module.Shape("w", (corpus_module.Cell(0, 2, 1 << 30, 0), corpus_module.Cell(1, 2, 1 << 30, 0)),
                                1, True, 4, "slots", True)
    pairs = {p.name: p for p in corpus_module.corpus(shape, "img")}
    assert pairs["guaranteed-unit"].full == corpus_module.Held(1, True, frozenset())
    assert pairs["device-matching"].full == corpus_module.Held(1, True, frozenset({"numa-align/numa-1"}))
    assert pairs["burstable"].full == corpus_module.Held(0, False, frozenset())
    assert pairs["init-container"].full.cpus == 1  # the app's CPU, not the init container's
    held = corpus_module.Held(2, True, frozenset({"numa-align/numa-0"}))
    partial = corpus_module.parse_nrt(entry("1", {}, {})).allocations["ns/pod"]
    assert held.missing(partial) == ["1 of 2 CPUs", "no memory", "no numa-align/numa-0"]
