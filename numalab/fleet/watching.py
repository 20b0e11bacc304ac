"""The bench's own watch of one side's pods: when each was created and bound, by this process's clock.

Times are time.monotonic() when the event reached the bench (the ADDED event for creation, the first event
showing spec.nodeName for binding), not the API's timestamps, which count whole seconds. A pod listed after the
watch had to be taken again (410) gets the relist's time; `relisted` counts those, whose times are not exact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from numalab.fleet.kube_api import ApiError, Expired

log = logging.getLogger(__name__)


class PodWatchApi(Protocol):
    def list_pods(self, namespace: str | None = None, *, field_selector: str = "",
                  label_selector: str = "") -> tuple[list[dict[str, Any]], str]: ...

    def watch_pods(self, resource_version: str, namespace: str | None = None, *, field_selector: str = "",
                   label_selector: str = "") -> Any: ...

    def interrupt(self) -> None: ...


@dataclass
class PodTimes:
    """One pod: when it was seen created and bound, when first reported Unschedulable, its phase, whether it is
    gone."""

    added: float
    bound: float | None = None
    unschedulable: float | None = None
    phase: str = "Pending"
    gone: bool = False


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return None


class PodLog:
    """What `observe` saw of each pod (by uid); thread-safe readers for the bench's loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pods: dict[str, PodTimes] = {}
        self.relisted = 0
        self._made: Counter[str] = Counter()
        self._lock = threading.Lock()

    def observe(self, kind: str, pod: dict[str, Any], now: float | None = None, listed: bool = False) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) or a listed pod."""
        now = self.clock() if now is None else now
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid = str(metadata.get("uid") or metadata.get("name"))
        with self._lock:
            times = self.pods.get(uid)
            if times is None:
                times = self.pods[uid] = PodTimes(now)
                self.relisted += listed
                if app := (metadata.get("labels") or {}).get("app"):
                    self._made[app] += 1
            if kind == "DELETED":
                times.gone = True
                return
            times.phase = str((pod.get("status") or {}).get("phase") or "Pending")
            if spec.get("nodeName"):
                if times.bound is None:
                    times.bound = now
                return
            condition = scheduled_condition(pod) or {}
            if condition.get("status") == "False" and condition.get("reason") == "Unschedulable" \
                    and times.unschedulable is None:
                times.unschedulable = now

    # -- readings ------------------------------------------------------------------------------------------

    def unschedulable(self) -> int:
        """Unbound pods (not gone) the scheduler reported Unschedulable."""
        with self._lock:
            return sum(1 for t in self.pods.values() if t.bound is None and not t.gone and t.unschedulable is not None)

    def stuck(self, now: float, seconds: float) -> int:
        """Unbound pods first reported Unschedulable at least `seconds` ago."""
        with self._lock:
            return sum(1 for t in self.pods.values() if t.bound is None and not t.gone
                       and t.unschedulable is not None and now - t.unschedulable >= seconds)

    def bind_times(self, since: float, until: float | None = None) -> list[float]:
        """When the pods created in [since, until) were bound."""
        with self._lock:
            return [t.bound for t in self.pods.values() if t.bound is not None and _within(t.added, since, until)]

    def latencies(self, since: float, until: float | None = None) -> list[float]:
        """Creation-to-binding seconds of the pods created in [since, until) and bound."""
        with self._lock:
            return [t.bound - t.added for t in self.pods.values()
                    if t.bound is not None and _within(t.added, since, until)]

    def made(self) -> Counter[str]:
        """Pods seen per Deployment (their `app` label: numalab.fleet.workload), gone ones included: what its
        ReplicaSet made. Counted as they are first seen; a side asks every poll while the fleet fills."""
        with self._lock:
            return Counter(self._made)

    def counts(self) -> dict[str, int]:
        """Pods seen, bound, unbound now, and Failed."""
        with self._lock:
            pods = list(self.pods.values())
        return {"seen": len(pods), "bound": sum(t.bound is not None for t in pods),
                "unbound": sum(t.bound is None and not t.gone for t in pods),
                "failed": sum(t.phase == "Failed" for t in pods)}


def _within(when: float, since: float, until: float | None) -> bool:
    return when >= since and (until is None or when < until)


def watch_into(log_: PodLog, api: PodWatchApi, namespace: str | None, selector: str, stop: threading.Event,
               ready: threading.Event) -> None:
    """List then watch the pods matching `selector` (in `namespace`; None: in every one) into `log_` until `stop`
    (run in a thread; `api` must be its own: interrupt() ends the watch under way)."""
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                pods, version = api.list_pods(namespace, label_selector=selector)
                _listed(log_, pods)
                ready.set()
            for kind, pod in api.watch_pods(version, namespace, label_selector=selector):
                version = (pod.get("metadata") or {}).get("resourceVersion") or version
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    log_.observe(kind, pod)
                if stop.is_set():
                    break
        except Expired:
            version = None
        except ApiError as exc:
            if not stop.is_set():
                log.warning("watching the bench's pods: %s; watching again in 1s", exc)
                stop.wait(1.0)


def _listed(log_: PodLog, pods: Iterable[dict[str, Any]]) -> None:
    for pod in pods:
        log_.observe("ADDED", pod, listed=True)
