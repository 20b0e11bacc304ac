"""A kubelet the apiserver cannot reach for a moment (restarting, port not up yet) is not a verdict on
the pod: the log is asked again until the pod's deadline, and a deadline names the last refusal."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from e2e import kube
from e2e.kube import Cluster, PodTrouble
from tests.e2e_logic.test_probe_output import PINNED_TO_1

REFUSED = '{"message":"Get \\"https://10.77.2.13:10250/containerLogs/ns/p/probe\\": connect: connection refused"}'


class Core:
    """read_namespaced_pod and read_namespaced_pod_log of a CoreV1Api, the log answers scripted."""

    def __init__(self, answers: list[str | ApiException]) -> None:
        self.answers = answers

    def read_namespaced_pod(self, name, namespace):
        return {"status": {"phase": "Running"}}

    def read_namespaced_pod_log(self, name, namespace, container):
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, ApiException):
            raise answer
        return answer


def refused() -> ApiException:
    exc = ApiException(status=500, reason="Internal Server Error")
    exc.body = REFUSED
    return exc


def cluster(answers: list[str | ApiException], timeout: float, monkeypatch) -> Cluster:
    monkeypatch.setattr(kube, "POLL_SECONDS", 0.0)
    made = Cluster.__new__(Cluster)
    made.core, made.namespace, made.pod_timeout, made.unreachable = Core(answers), "ns", timeout, None
    monkeypatch.setattr(made, "pod", lambda name: {"status": {"phase": "Running"}})
    monkeypatch.setattr(made, "explain", lambda name: f"pod ns/{name} phase Running")
    return made


def test_an_unreachable_kubelet_is_asked_again(monkeypatch):
    reports = cluster([refused(), refused(), PINNED_TO_1], 30, monkeypatch).wait_for_probes("p", ["probe"])
    assert reports["probe"].cpus == {2, 3}


def test_a_kubelet_unreachable_until_the_deadline_is_named(monkeypatch):
    with pytest.raises(PodTrouble, match="last log read: 500 .*connection refused"):
        cluster([refused()], 0.05, monkeypatch).wait_for_probes("p", ["probe"])


def test_other_api_errors_still_fail_at_once(monkeypatch):
    with pytest.raises(ApiException):
        cluster([ApiException(status=403, reason="Forbidden")], 30, monkeypatch).wait_for_probes("p", ["probe"])


def test_a_wait_or_a_deletion_polls_at_the_pace_its_caller_asks(monkeypatch):
    """Case 8 reads its pairs' pods every second; everything else keeps the suite's 2 s."""
    slept: list[float] = []
    monkeypatch.setattr(kube.time, "sleep", slept.append)
    made = cluster([PINNED_TO_1], 30, monkeypatch)
    monkeypatch.setattr(kube, "POLL_SECONDS", 2.0)
    answers = iter([None, None, True])
    made.wait_until("p", lambda pod: (next(answers), "decided"), every=1.0)
    assert slept == [1.0, 1.0]
    reads = iter([{}, ApiException(status=404)])

    def read(name, namespace):
        answer = next(reads)
        if isinstance(answer, ApiException):
            raise answer
        return answer
    made.core.read_namespaced_pod = read
    made.core.delete_namespaced_pod = lambda name, namespace, grace_period_seconds: None
    made.delete_pods(["p"], every=1.0)
    assert slept == [1.0, 1.0, 1.0]
