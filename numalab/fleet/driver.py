"""The simulated fleet against a real API server: registers each node's Node and NodeResourceTopology object,
watches bound pods and answers each once as its node's kubelet and numa-align would (kubelet_sim).

Nodes are shared out over `workers` threads (a node always to the same one, so its kubelet is never touched by
two); a worker takes what queued up for it in one batch, judges it in order, writes the pods' statuses first
(the NUMA-aware scheduler counts Running pods against the object's fingerprint), then one object per node that
changed, however many of its pods the batch held. A pod marked for deletion is released and deleted at once
(grace 0, uid precondition), as the kubelet finishes a deletion; a pod gone from a relist is released.
`Counts` tallies the decisions per scheduler name and reason, and the writes.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import urllib3
from kubernetes.client.rest import ApiException
from numa_align.nrt_api import GROUP, PLURAL, VERSION

from numalab.fleet.kubelet_sim import Decision, SimulatedKubelet, now_rfc3339, pod_key
from numalab.fleet.nodes import node_object
from numalab.fleet.spec import NodeDescription

log = logging.getLogger(__name__)

FIELD_SELECTOR = "spec.nodeName!="
NRT_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
TERMINAL = ("Succeeded", "Failed")
LIST_CHUNK = 500


class ApiError(Exception):
    """A request the API server refused (status) or that got no answer (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status


class Expired(ApiError):
    """The watch's resourceVersion is too old (410): list again."""


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


class KubeFleetApi:
    """FleetApi over the official client's ApiClient (its configuration, credentials and connection pool; size
    `connection_pool_maxsize` to the workers), raw JSON in and out: the generated model classes' validation would
    cost more than the simulation at hundreds of writes a second."""

    def __init__(self, api_client: Any, timeout: float = 30.0, watch_seconds: int = 240) -> None:
        self.client, self.timeout, self.watch_seconds = api_client, timeout, watch_seconds
        self._watching: Any = None

    def _call(self, method: str, path: str, body: Any = None, query: Sequence[tuple[str, str]] = (),
              content_type: str = "application/json", stream: bool = False) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self.client.param_serialize(method, path, query_params=list(query), header_params=headers,
                                              body=body, auth_settings=["BearerToken"])
        timeout = (self.timeout, self.watch_seconds + self.timeout) if stream else self.timeout
        try:
            response = self.client.call_api(*request, _request_timeout=timeout)
        except ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, " ".join(str(exc).split())) from None
        if stream and 200 <= response.status < 300:
            return response.response
        data = response.read()
        response.response.release_conn()
        answer = json.loads(data) if data.startswith(b"{") else {"message": data[:200].decode(errors="replace")}
        if not 200 <= response.status < 300:
            raise ApiError(response.status, str(answer.get("message")))
        return answer

    def create_node(self, node: dict[str, Any]) -> str:
        try:
            return self._call("POST", "/api/v1/nodes", node)["metadata"]["uid"]
        except ApiError as exc:
            if exc.status != 409:
                raise
        return self._call("GET", f"/api/v1/nodes/{node['metadata']['name']}")["metadata"]["uid"]

    def put_nrt(self, nrt: dict[str, Any]) -> None:
        try:
            self._call("POST", NRT_PATH, nrt)
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.patch_nrt(nrt)

    def patch_nrt(self, nrt: dict[str, Any]) -> None:
        """A merge patch of everything numa-align writes (lists are replaced whole): no read, no conflict."""
        metadata = nrt["metadata"]
        body = {"metadata": {k: metadata[k] for k in ("annotations", "ownerReferences") if k in metadata},
                "zones": nrt["zones"], "attributes": nrt["attributes"]}
        try:
            self._call("PATCH", f"{NRT_PATH}/{metadata['name']}", body, content_type=MERGE_PATCH)
        except ApiError as exc:
            if exc.status != 404:
                raise
            self._call("POST", NRT_PATH, nrt)  # deleted meanwhile (the garbage collector, a person): again

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", patch, content_type=STRATEGIC_PATCH)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        self._call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", options)

    def list_bound_pods(self) -> tuple[list[dict[str, Any]], str]:
        pods: list[dict[str, Any]] = []
        query = [("fieldSelector", FIELD_SELECTOR), ("limit", str(LIST_CHUNK))]
        while True:
            page = self._call("GET", "/api/v1/pods", query=query)
            pods += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return pods, str((page.get("metadata") or {}).get("resourceVersion") or "")
            query = [*query[:2], ("continue", token)]

    def watch_bound_pods(self, resource_version: str) -> Iterator[tuple[str, dict[str, Any]]]:
        query = [("fieldSelector", FIELD_SELECTOR), ("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("resourceVersion", resource_version), ("timeoutSeconds", str(self.watch_seconds))]
        self._watching = response = self._call("GET", "/api/v1/pods", query=query, stream=True)
        try:
            for line in response:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise (Expired if obj.get("code") == 410 else ApiError)(int(obj.get("code") or 0),
                                                                            str(obj.get("message")))
                yield str(kind), obj
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise ApiError(0, f"watch ended: {' '.join(str(exc).split())}") from None
        finally:
            self._watching = None
            response.release_conn()

    def interrupt(self) -> None:
        response = self._watching
        if response is not None:
            getattr(response, "shutdown", response.close)()


class Counts:
    """Decisions per scheduler name (admitted; rejected and cannot-judge per reason) and writes per kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decisions: Counter[tuple[str, str, str]] = Counter()
        self.writes: Counter[str] = Counter()

    def decided(self, scheduler: str, decision: Decision) -> None:
        reason = {"admitted": "", "rejected": decision.reason.split(": ")[0]}.get(
            decision.verdict, decision.reason.removeprefix("cannot judge: "))
        with self._lock:
            self.decisions[(scheduler, decision.verdict, reason)] += 1

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
    """`register()` once, then `run(stop, ready)` until `stop` is set. `on_decision(pod, decision)`, when given, sees
    every decision (from the worker threads)."""

    def __init__(self, api: FleetApi, fleet: Sequence[NodeDescription], *, workers: int = 8, batch: int = 256,
                 clock: Callable[[], str] = now_rfc3339,
                 on_decision: Callable[[Mapping[str, Any], Decision], None] | None = None) -> None:
        self.api, self.fleet, self.batch, self.clock, self.on_decision = api, list(fleet), batch, clock, on_decision
        self.kubelets: dict[str, SimulatedKubelet] = {}
        self.counts = Counts()
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(max(1, workers))]
        self._owner = {desc.name: i % len(self._queues) for i, desc in enumerate(self.fleet)}

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
            self._queues[owner].put((kind, pod))

    def _resync(self, pods: list[dict[str, Any]]) -> None:
        present = frozenset((str(p["spec"].get("nodeName")), *pod_key(p)) for p in pods)
        for q in self._queues:
            q.put(("sync", present))
        for pod in pods:
            self._dispatch("pod", pod)

    def _work(self, index: int) -> None:
        q, seen, unwritten = self._queues[index], set(), {}
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
            self._apply(index, [entry for entry in batch if entry is not None], seen, unwritten)
            if None in batch:
                return

    def _apply(self, index: int, batch: list[tuple[str, Any]], seen: set[str],
               unwritten: dict[str, SimulatedKubelet]) -> None:
        """Judge and release in order; then the statuses, the deletions, and one object per changed node (one that
        could not be written is tried again with the next batch, or within a second)."""
        statuses: list[tuple[str, str, dict[str, Any]]] = []
        deletes: list[tuple[str, str, str]] = []
        dirty = dict(unwritten)
        unwritten.clear()
        for kind, pod in batch:
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
            self.counts.decided(str(pod["spec"].get("schedulerName") or "default-scheduler"), decision)
            if self.on_decision is not None:
                self.on_decision(pod, decision)
            if decision.status_patch is not None:
                statuses.append((*key, decision.status_patch))
            if decision.nrt is not None:
                dirty[kubelet.node.name] = kubelet
        for namespace, name, patch in statuses:
            self._write("status", self.api.patch_pod_status, namespace, name, patch)
        for namespace, name, uid in deletes:
            self._write("delete", self.api.delete_pod, namespace, name, uid)
        for name, kubelet in dirty.items():
            if not self._write("nrt", self.api.patch_nrt, kubelet.nrt):
                unwritten[name] = kubelet

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
