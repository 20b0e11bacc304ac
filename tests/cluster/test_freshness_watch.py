"""The freshness case's watches outlive their streams: one that ended or failed is re-opened (and counted),
so the pods after it are still seen, where a silently dead watch failed the case with no word of why."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from types import SimpleNamespace

from tests.cluster.freshness import Seen, _keep_watching, _names_in, _object_seen, _pod_seen


def _pod(name: str, started: bool) -> SimpleNamespace:
    return SimpleNamespace(metadata=SimpleNamespace(name=name),
                           status=SimpleNamespace(start_time="2026-11-28T21:00:00Z" if started else None))


def test_a_watch_that_failed_or_ended_is_reopened_and_later_objects_are_seen() -> None:
    seen, stop = Seen(), threading.Event()
    opened: list[int] = []

    def stream(_watch: object) -> Iterator[dict]:
        opened.append(1)
        if len(opened) == 1:
            yield {"object": _pod("fresh-worker-3-0", True)}
            raise ConnectionResetError("peer closed")
        if len(opened) == 2:
            yield {"object": _pod("fresh-worker-3-1", False)}
            return  # the server's timeout: a stream's ordinary end
        yield {"object": _pod("fresh-worker-3-1", True)}
        stop.set()

    _keep_watching("pods", stream, _pod_seen(seen), seen, stop)
    assert sorted(seen.acknowledged) == ["fresh-worker-3-0", "fresh-worker-3-1"]
    assert len(opened) == 3
    assert seen.failures == {"pods": ["ConnectionResetError: peer closed"]}  # an ordinary end is no failure


def test_an_object_names_only_the_freshness_pods_of_the_cases_namespace() -> None:
    from numa_align import nrt_api

    from tests.cluster.faults import NAMESPACE

    allocations = {f"{NAMESPACE}/fresh-worker-3-4": {}, f"{NAMESPACE}/audit-1": {}, "other/fresh-x": {}}
    nrt = {"metadata": {"annotations": {nrt_api.ALLOCATIONS_ANNOTATION: json.dumps(allocations)}}}
    assert _names_in(nrt) == ["fresh-worker-3-4"]
    assert _names_in({"metadata": {}}) == []
    seen = Seen()
    _object_seen(seen)(nrt)
    assert list(seen.published) == ["fresh-worker-3-4"]


class _Pods:
    """A CoreV1Api double: a pod deleted gracefully stays listed until its kubelet is done (`teardown` lists),
    one deleted with grace 0 leaves the API at once, as the apiserver does."""

    def __init__(self, teardown: int) -> None:
        self.listed, self.teardown, self.grace = 0, teardown, None

    def delete_namespaced_pod(self, name: str, namespace: str, grace_period_seconds: int) -> None:
        self.grace = grace_period_seconds

    def list_namespaced_pod(self, namespace: str, field_selector: str) -> SimpleNamespace:
        self.listed += 1
        left = self.grace != 0 and self.listed <= self.teardown
        return SimpleNamespace(items=[field_selector] if left else [])


def test_the_next_freshness_pod_waits_for_the_kubelets_teardown_of_the_last() -> None:
    """Deleted with grace 0 the object went at once and the kubelet's teardowns piled up behind the case (in
    CI a pod then went 60 s with no status at all); deleted gracefully, it is gone once the kubelet is done."""
    from tests.cluster.freshness import let_go

    pods = _Pods(teardown=3)
    let_go(pods, "fresh-worker-3-0", why=lambda: "", timeout=10)  # type: ignore[arg-type]
    assert pods.grace and pods.listed == 4  # listed through the teardown, gone at the fourth
