"""Case 8's runner (e2e/test_8_explain_agreement.py) waiting on numa-align's allocations annotation: a pair's
fillers count only once the annotation gives them all their CPUs (an object written while the kubelet was still
allocating names a pod with its devices and none of its CPUs yet), and deleted pods only once they are gone."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tests.e2e_logic.conftest import load_e2e_module
from tests.explain.cluster import nrt

for _name in ("probe_pods", "kubelet_outcome", "closest_pairs", "explain_corpus", "kube", "nrt", "results"):
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
