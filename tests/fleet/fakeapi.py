"""An in-memory FleetApi: Nodes, NodeResourceTopology objects and pods, with a watch fed from a queue that sees the
driver's own writes as the API server's watch would (a status patch comes back MODIFIED, a deletion DELETED)."""

from __future__ import annotations

import copy
import queue
import threading
from typing import Any

from numalab.fleet.kube_api import ApiError, Expired

END = object()


class FakeFleetApi:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nrts: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.events: queue.Queue = queue.Queue()
        self.failing_nrt_writes = 0
        self.gate: threading.Event | None = None
        """While set to an unset Event, the first status patch waits for it."""
        self.lock = threading.Lock()
        self.version = 0

    # -- FleetApi ---------------------------------------------------------------------------------------

    def create_node(self, node: dict[str, Any]) -> str:
        with self.lock:
            name = node["metadata"]["name"]
            stored = self.nodes.setdefault(name, copy.deepcopy(node))
            stored["metadata"].setdefault("uid", f"uid-{name}")
            return stored["metadata"]["uid"]

    def put_nrt(self, nrt: dict[str, Any]) -> None:
        with self.lock:
            self.nrts[nrt["metadata"]["name"]] = copy.deepcopy(nrt)

    def patch_nrt(self, nrt: dict[str, Any]) -> None:
        with self.lock:
            if self.failing_nrt_writes:
                self.failing_nrt_writes -= 1
                raise ApiError(500, "etcd is busy")
            self.nrts[nrt["metadata"]["name"]] = copy.deepcopy(nrt)
            self.writes.append(("nrt", nrt["metadata"]["name"]))

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        gate = self.gate
        if gate is not None:
            self.gate = None
            gate.wait(5)
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is None:
                raise ApiError(404, f'pods "{name}" not found')
            pod["status"] = {**pod.get("status", {}), **patch["status"]}
            self.writes.append(("status", f"{namespace}/{name}"))
            self._event("MODIFIED", pod)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is None or pod["metadata"]["uid"] != uid:
                raise ApiError(404 if pod is None else 409, "gone or another pod")
            del self.pods[(namespace, name)]
            self.writes.append(("delete", f"{namespace}/{name}"))
            self._event("DELETED", pod)

    def list_bound_pods(self) -> tuple[list[dict[str, Any]], str]:
        with self.lock:
            return [copy.deepcopy(p) for p in self.pods.values() if p["spec"].get("nodeName")], str(self.version)

    def watch_bound_pods(self, resource_version: str):
        while True:
            event = self.events.get()
            if event is END:
                return
            if event == "expire":
                raise Expired(410, "too old resource version")
            yield event

    def interrupt(self) -> None:
        self.events.put(END)

    # -- what the rest of the cluster does ----------------------------------------------------------------

    def _event(self, kind: str, pod: dict[str, Any]) -> None:
        self.version += 1
        obj = copy.deepcopy(pod)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.events.put((kind, obj))

    def bind(self, pod: dict[str, Any], quietly: bool = False) -> None:
        """The scheduler bound it (quietly: while nobody watched)."""
        with self.lock:
            self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = copy.deepcopy(pod)
            if not quietly:
                self._event("ADDED", pod)

    def mark_deleted(self, namespace: str, name: str) -> None:
        """kubectl delete: a bound pod only gets its deletionTimestamp until its kubelet finishes."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            self._event("MODIFIED", pod)

    def forget(self, namespace: str, name: str) -> None:
        """The pod went while nobody watched."""
        with self.lock:
            del self.pods[(namespace, name)]
