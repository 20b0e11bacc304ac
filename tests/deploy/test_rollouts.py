"""Waiting for a workload numa-lab applied (CoreDNS's Deployment, numa-align's DaemonSet): done only when
every replica runs the current template, and a timeout names each pod with its last event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace as NS

import pytest

from numalab.deploy import api

T0 = datetime(2026, 11, 24, tzinfo=UTC)


def deployment(generation=2, observed=2, replicas=1, updated=1, available=1, current=1):
    return NS(metadata=NS(generation=generation), spec=NS(replicas=replicas),
              status=NS(observed_generation=observed, updated_replicas=updated, available_replicas=available,
                        replicas=current))


def test_a_deployment_is_rolled_out_when_every_replica_is_updated_and_available() -> None:
    assert api._rolled_out(deployment())
    assert not api._rolled_out(deployment(observed=1))  # the controller has not seen the new template
    assert not api._rolled_out(deployment(available=0))
    assert not api._rolled_out(deployment(current=2))  # an old pod is still terminating


class FakeCore:
    def __init__(self, pods, events):
        self.pods, self.events = pods, events

    def list_namespaced_pod(self, namespace, label_selector, _request_timeout):
        assert label_selector == "app.kubernetes.io/name=numa-align"
        return NS(items=self.pods)

    def list_namespaced_event(self, namespace, field_selector, _request_timeout):
        name = field_selector.removeprefix("involvedObject.name=")
        return NS(items=self.events.get(name, []))


def event(reason, message, minutes):
    return NS(reason=reason, message=message, last_timestamp=T0 + timedelta(minutes=minutes), event_time=None,
              metadata=NS(creation_timestamp=T0))


def test_the_last_event_of_each_pod_is_named() -> None:
    pods = [NS(metadata=NS(name="numa-align-x"), status=NS(phase="Pending"), spec=NS(node_name="worker-1")),
            NS(metadata=NS(name="numa-align-y"), status=NS(phase="Running"), spec=NS(node_name=None))]
    events = {"numa-align-x": [event("Failed", "Failed to pull image", 2), event("Pulling", "Pulling image", 1)]}
    text = api.pods_and_last_events(FakeCore(pods, events), "kube-system", "numa-align")
    assert text == ("numa-align-x (Pending on worker-1): Failed: Failed to pull image; "
                    "numa-align-y (Running on no node): no event")
    assert "no pod was created" in api.pods_and_last_events(FakeCore([], {}), "kube-system", "numa-align")


def test_a_daemonset_that_never_gets_ready_times_out_naming_its_pods(monkeypatch) -> None:
    pods = [NS(metadata=NS(name="numa-align-x"), status=NS(phase="Pending"), spec=NS(node_name="worker-1"))]
    core = FakeCore(pods, {"numa-align-x": [event("Failed", "ErrImagePull", 1)]})
    daemonset = NS(metadata=NS(generation=1), status=NS(observed_generation=1, desired_number_scheduled=3,
                                                        updated_number_scheduled=3, number_ready=2))
    core.api_client = None
    monkeypatch.setattr(api, "core_api", lambda kubeconfig: core)
    monkeypatch.setattr(api.client, "AppsV1Api", lambda _: NS(read_namespaced_daemon_set=lambda *a, **k: daemonset))
    monkeypatch.setattr(api.time, "sleep", lambda _: None)
    with pytest.raises(RuntimeError, match=r"DaemonSet kube-system/numa-align not ready after 0 s: "
                                           r"numa-align-x \(Pending on worker-1\): Failed: ErrImagePull"):
        api.wait_daemonset_ready("kubeconfig", "kube-system", "numa-align", timeout=0.2)
    daemonset.status.number_ready = 3
    api.wait_daemonset_ready("kubeconfig", "kube-system", "numa-align", timeout=5)
