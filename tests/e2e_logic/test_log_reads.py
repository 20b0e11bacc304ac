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
