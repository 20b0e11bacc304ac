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
