"""The bench's watch of a side's pods: creation and bind times by its own clock, pods left Unschedulable, and a
watch that expires and lists again."""

from __future__ import annotations

import threading

from numalab.fleet.kube_api import Expired
from numalab.fleet.watching import PodLog, watch_into


def pod(name: str, node: str = "", unschedulable: bool = False, phase: str = "Pending", version: str = "1") -> dict:
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}] if unschedulable else []
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version},
            "spec": {"nodeName": node} if node else {}, "status": {"phase": phase, "conditions": conditions}}


def test_times_from_creation_to_binding_and_pods_left_unschedulable():
    log = PodLog()
    log.observe("ADDED", pod("a"), now=1.0)
    log.observe("ADDED", pod("b"), now=2.0)
    log.observe("MODIFIED", pod("a", unschedulable=True), now=2.5)
    log.observe("MODIFIED", pod("b", unschedulable=True), now=3.0)
    assert log.unschedulable() == 2
    assert log.stuck(now=12.6, seconds=10) == 1 and log.stuck(now=12.4, seconds=10) == 0
    log.observe("MODIFIED", pod("a", node="n1"), now=5.0)
    log.observe("MODIFIED", pod("a", node="n1", phase="Running"), now=5.5)  # bound once: its first time kept
    log.observe("ADDED", pod("c"), now=6.0)
    log.observe("MODIFIED", pod("c", node="n2"), now=6.25)
    assert sorted(log.latencies(since=0.0)) == [0.25, 4.0]
    assert log.latencies(since=0.0, until=6.0) == [4.0] and log.bind_times(since=6.0) == [6.25]
    assert log.unschedulable() == 1
    log.observe("DELETED", pod("b", unschedulable=True), now=7.0)
    assert log.unschedulable() == 0
    log.observe("MODIFIED", pod("c", node="n2", phase="Failed"), now=7.5)
    assert log.counts() == {"seen": 3, "bound": 2, "unbound": 0, "failed": 1}


def test_pods_made_per_deployment_gone_ones_included():
    log = PodLog()
    for name, app in (("a", "d1"), ("b", "d1"), ("c", "d2"), ("d", None)):
        body = pod(name)
        body["metadata"]["labels"] = {"app": app} if app else {}
        log.observe("ADDED", body, now=1.0)
    log.observe("DELETED", pod("a"), now=2.0)
    assert log.made() == {"d1": 2, "d2": 1}


class Api:
    """Lists, then a watch of two events that expires, then a relist with a pod made meanwhile."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.lists, self.watches = stop, 0, []
        self.ended = threading.Event()

    def list_pods(self, namespace=None, *, field_selector="", label_selector=""):
        self.lists += 1
        assert (namespace, label_selector) == ("default", "numa-lab/workload=s-default")
        if self.lists == 1:
            return [pod("old", node="n1")], "10"
        return [pod("old", node="n1"), pod("missed", node="n2")], "20"

    def watch_pods(self, version, namespace=None, *, field_selector="", label_selector=""):
        self.watches.append(version)
        if len(self.watches) == 1:
            yield "ADDED", pod("new", version="11")
            yield "BOOKMARK", {"metadata": {"resourceVersion": "12"}}
            raise Expired(410, "too old resource version")
        self.stop.set()
        yield "MODIFIED", pod("new", node="n1", version="21")
        yield "MODIFIED", pod("never", version="22")  # after stop: not read

    def interrupt(self):
        self.ended.set()


def test_a_watch_that_expires_lists_again_and_counts_what_it_had_missed():
    log, stop, ready = PodLog(), threading.Event(), threading.Event()
    api = Api(stop)
    watch_into(log, api, "default", "numa-lab/workload=s-default", stop, ready)
    assert ready.is_set() and api.lists == 2 and api.watches == ["10", "20"]
    assert log.relisted == 2  # old and missed: their times are the lists'
    assert log.counts() == {"seen": 3, "bound": 3, "unbound": 0, "failed": 0}
