"""The simulated fleet against a real API server: registers each node's Node and NodeResourceTopology object,
watches bound pods and answers each once as its node's kubelet and numa-align would (kubelet_sim).

Nodes are shared out over `workers` threads (a node always to the same one, so its kubelet is never touched by
two); a worker takes what queued up for it in one batch, judges it in order, writes one object per node that
changed, however many of its pods the batch held, then the pods' statuses (a numa-scheduler resyncs a node only
when the object's pod fingerprint is that of every pod bound there and not finished, so a pod bound and not
judged yet, or judged and rejected but not yet Failed, keeps the node's reservations). A pod marked for deletion
is released and deleted at once (grace 0, uid precondition), as the kubelet finishes a deletion; a pod gone from
a relist is released. `Counts` tallies the decisions per scheduler name and reason, the writes, and each judged
pod's lag from its event to its object and status written: the time a numa-scheduler holds the node's
reservations instead of its object (README, "Fleet scale").
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from numalab.fleet.kube_api import ApiError, Expired
from numalab.fleet.kubelet_sim import Decision, SimulatedKubelet, now_rfc3339, pod_key
from numalab.fleet.nodes import node_object
from numalab.fleet.spec import NodeDescription

log = logging.getLogger(__name__)

TERMINAL = ("Succeeded", "Failed")


class FleetApi(Protocol):
    """The calls the driver makes; objects are API-shaped dicts."""

    def create_node(self, node: dict[str, Any]) -> str: ...  # the Node's uid (an existing Node's too)
    def put_nrt(self, nrt: dict[str, Any]) -> None: ...  # create, or patch an existing object
    def patch_nrt(self, nrt: dict[str, Any]) -> None: ...
    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...
    def delete_pod(self, namespace: str, name: str, uid: str) -> None: ...
    def list_bound_pods(self) -> tuple[list[dict[str, Any]], str]: ...  # (pods, resourceVersion)
    def watch_bound_pods(self, resource_version: str) -> Iterator[tuple[str, dict[str, Any]]]: ...
    def interrupt(self) -> None: ...  # end a watch under way (from another thread)


class Counts:
    """Decisions per scheduler name (admitted; rejected and cannot-judge per reason), writes per kind, and when
    each scheduler's pod was last admitted (time.monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.decisions: Counter[tuple[str, str, str]] = Counter()
        self.writes: Counter[str] = Counter()
        self.last_admitted: dict[str, float] = {}
        self.lags: dict[str, list[float]] = {}

    def decided(self, scheduler: str, decision: Decision) -> None:
        reason = {"admitted": "", "rejected": decision.reason.split(": ")[0]}.get(
            decision.verdict, decision.reason.removeprefix("cannot judge: "))
        with self._lock:
            self.decisions[(scheduler, decision.verdict, reason)] += 1
            if decision.verdict == "admitted":
                self.last_admitted[scheduler] = self.clock()

    def answered(self, pods: Sequence[tuple[str, float]]) -> None:
        """Pods judged, each by its scheduler and when its event reached the driver: the seconds until their object
        and status were written are each pod's kubelet lag."""
        now = self.clock()
        with self._lock:
            for scheduler, arrived in pods:
                self.lags.setdefault(scheduler, []).append(now - arrived)

    def rejected(self, scheduler: str) -> int:
        with self._lock:
            return sum(n for (name, verdict, _), n in self.decisions.items() if name == scheduler
                       and verdict == "rejected")

    def wrote(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self.writes[kind] += count

    def snapshot(self) -> dict[str, Any]:
        """{"decisions": {scheduler: {"admitted": n, "rejected": {reason: n}, "cannot-judge": {why: n}}},
        "writes": {kind: n}}"""
        with self._lock:
            out: dict[str, dict[str, Any]] = {}
            for (scheduler, verdict, reason), n in sorted(self.decisions.items()):
                mine = out.setdefault(scheduler, {"admitted": 0, "rejected": {}, "cannot-judge": {}})
                if verdict == "admitted":
                    mine["admitted"] += n
                else:
                    mine[verdict][reason] = n
            return {"decisions": out, "writes": dict(self.writes)}


class FleetDriver:
    """`register()` once, then `run(stop, ready)` until `stop` is set. `on_decision(kubelet, pod, decision)`, when
    given, sees every decision as it is made, the kubelet as it is after it (from the worker threads)."""

    def __init__(self, api: FleetApi, fleet: Sequence[NodeDescription], *, workers: int = 8, batch: int = 256,
                 clock: Callable[[], str] = now_rfc3339,
                 on_decision: Callable[[SimulatedKubelet, Mapping[str, Any], Decision], None] | None = None) -> None:
        self.api, self.fleet, self.batch, self.clock, self.on_decision = api, list(fleet), batch, clock, on_decision
        self.kubelets: dict[str, SimulatedKubelet] = {}
        self.counts = Counts()
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(max(1, workers))]
        self._owner = {desc.name: i % len(self._queues) for i, desc in enumerate(self.fleet)}
        self._unwritten: list[dict[str, SimulatedKubelet]] = [{} for _ in self._queues]
        self._queued = [0] * len(self._queues)  # entries put on each queue (by the watching thread) ...
        self._done = [0] * len(self._queues)  # ... and judged by its worker

    def holding(self) -> int:
        """Pods the simulated kubelets hold now."""
        return sum(len(kubelet.pods) for kubelet in list(self.kubelets.values()))

    def idle(self) -> bool:
        """Nothing queued, being judged or left to write: the objects show what the kubelets hold."""
        return self._queued == self._done and not any(self._unwritten)

    def register(self) -> None:
        """Create every Node (or take the existing one's uid) and its object, `workers` requests at a time."""
        def one(desc: NodeDescription) -> None:
            kubelet = SimulatedKubelet(desc, self.api.create_node(node_object(desc)), self.clock)
            self.api.put_nrt(kubelet.nrt)
            self.kubelets[desc.name] = kubelet
            self.counts.wrote("node")
            self.counts.wrote("nrt")

        with ThreadPoolExecutor(len(self._queues)) as pool:
            list(pool.map(one, self.fleet))

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        workers = [threading.Thread(target=self._work, args=(i,), name=f"fleet-kubelets-{i}", daemon=True)
                   for i in range(len(self._queues))]
        finished = threading.Event()

        def wake() -> None:  # the watch may be opened just after stop was set: interrupt until it is over
            stop.wait()
            while not finished.is_set():
                self.api.interrupt()
                finished.wait(0.2)

        for thread in (*workers, threading.Thread(target=wake, daemon=True)):
            thread.start()
        try:
            self._watch(stop, ready)
        finally:
            finished.set()
            for q in self._queues:
                q.put(None)
            for thread in workers:
                thread.join()

    def _watch(self, stop: threading.Event, ready: threading.Event | None) -> None:
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    pods, version = self.api.list_bound_pods()
                    self._resync(pods)
                    if ready is not None:
                        ready.set()
                for kind, pod in self.api.watch_bound_pods(version):
                    version = (pod.get("metadata") or {}).get("resourceVersion") or version
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._dispatch("gone" if kind == "DELETED" else "pod", pod)
                    if stop.is_set():
                        break
            except Expired:
                version = None
            except ApiError as exc:
                if not stop.is_set():
                    log.warning("watching bound pods: %s; watching again in 1s", exc)
                    self.counts.wrote("watch-error")
                    stop.wait(1.0)

    def _dispatch(self, kind: str, pod: dict[str, Any]) -> None:
        owner = self._owner.get(str((pod.get("spec") or {}).get("nodeName")))
        if owner is not None:
            self._queued[owner] += 1
            self._queues[owner].put((kind, pod, time.monotonic()))

    def _resync(self, pods: list[dict[str, Any]]) -> None:
        present = frozenset((str(p["spec"].get("nodeName")), *pod_key(p)) for p in pods)
        for i, q in enumerate(self._queues):
            self._queued[i] += 1
            q.put(("sync", present, time.monotonic()))
        for pod in pods:
            self._dispatch("pod", pod)

    def _work(self, index: int) -> None:
        q, seen, unwritten = self._queues[index], set(), self._unwritten[index]
        while True:
            try:
                batch = [q.get(timeout=1.0 if unwritten else None)]
            except queue.Empty:
                batch = []  # only the objects left unwritten
            while batch[-1:] != [None] and len(batch) < self.batch:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            entries = [entry for entry in batch if entry is not None]
            self._apply(index, entries, seen, unwritten)
            self._done[index] += len(entries)
            if None in batch:
                return

    def _apply(self, index: int, batch: list[tuple[str, Any, float]], seen: set[str],
               unwritten: dict[str, SimulatedKubelet]) -> None:
        """Judge and release in order; then one object per changed node (one that could not be written is tried
        again with the next batch, or within a second), the statuses and the deletions."""
        statuses: list[tuple[str, str, dict[str, Any]]] = []
        deletes: list[tuple[str, str, str]] = []
        answered: list[tuple[str, float]] = []  # (scheduler, when the pod's event arrived) of each pod judged
        dirty = dict(unwritten)
        unwritten.clear()
        for kind, pod, arrived in batch:
            if kind == "sync":  # pod: the (node, namespace, name) of every bound pod; release what is gone
                for name in [name for name, owner in self._owner.items() if owner == index and name in self.kubelets]:
                    kubelet = self.kubelets[name]
                    for key in [key for key in kubelet.pods if (name, *key) not in pod]:
                        kubelet.release(*key)
                        dirty[name] = kubelet
                continue
            kubelet = self.kubelets.get(str(pod["spec"].get("nodeName")))
            metadata, key = pod.get("metadata") or {}, pod_key(pod)
            uid, phase = str(metadata.get("uid") or "/".join(key)), (pod.get("status") or {}).get("phase")
            if kubelet is None:
                continue
            if kind == "gone" or metadata.get("deletionTimestamp") or phase in TERMINAL:
                if kubelet.release(*key) is not None:
                    dirty[kubelet.node.name] = kubelet
                if kind == "pod" and metadata.get("deletionTimestamp") and phase not in TERMINAL \
                        and f"delete {uid}" not in seen:
                    seen.add(f"delete {uid}")
                    deletes.append((*key, uid))
                continue
            if uid in seen:
                continue
            seen.add(uid)
            decision = kubelet.admit(pod)
            scheduler = str(pod["spec"].get("schedulerName") or "default-scheduler")
            self.counts.decided(scheduler, decision)
            answered.append((scheduler, arrived))
            if self.on_decision is not None:
                self.on_decision(kubelet, pod, decision)
            if decision.status_patch is not None:
                statuses.append((*key, decision.status_patch))
            if decision.nrt is not None:
                dirty[kubelet.node.name] = kubelet
        for name, kubelet in dirty.items():
            if not self._write("nrt", self.api.patch_nrt, kubelet.nrt):
                unwritten[name] = kubelet
        for namespace, name, patch in statuses:
            self._write("status", self.api.patch_pod_status, namespace, name, patch)
        for namespace, name, uid in deletes:
            self._write("delete", self.api.delete_pod, namespace, name, uid)
        self.counts.answered(answered)

    def _write(self, kind: str, call: Callable[..., None], *args: Any) -> bool:
        """One write, counted; a pod gone meanwhile is no failure (its DELETED event follows)."""
        try:
            call(*args)
        except ApiError as exc:
            gone = exc.status == 404 and kind != "nrt"
            self.counts.wrote(f"{kind}-gone" if gone else f"{kind}-error")
            if not gone:
                log.warning("%s write for %s failed: %s", kind, "/".join(map(str, args[:2])), exc)
            return gone
        self.counts.wrote(kind)
        return True
