"""A tiny Kubernetes API on 127.0.0.1 (plain HTTP) for the drain: nodes (get, list, strategic-merge patch),
pods by spec.nodeName, the Eviction subresource with PodDisruptionBudgets (matchLabels) that refuse with
429 while they allow no disruption, and the budgets' list. It records every eviction asked for; with
`failing` set it answers every request with that status (an API server in trouble)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml


def node(name: str, ready: bool = True, unschedulable: bool = False, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(namespace: str, name: str, on: str, labels: dict | None = None, owner: str | None = None,
        emptydir: bool = False, phase: str = "Running") -> dict:
    """A pod on node `on`; `owner`: the kind of its controller (None: a bare pod); `emptydir`: it has an emptyDir
    volume."""
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": f"uid-{namespace}-{name}",
                            "labels": dict(labels or {})}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "owner",
                                    "controller": True}]
    spec: dict[str, Any] = {"nodeName": on, "containers": [{"name": "c", "image": "i"}]}
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@dataclass
class Budget:
    namespace: str
    name: str
    match_labels: dict[str, str]
    refusals: int = -1  # evictions refused before one is allowed; -1: refuse for ever

    def as_dict(self) -> dict:
        return {"metadata": {"namespace": self.namespace, "name": self.name},
                "spec": {"selector": {"matchLabels": self.match_labels}}}


@dataclass
class FakeCluster:
    nodes: dict[str, dict] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict] = field(default_factory=dict)
    budgets: list[Budget] = field(default_factory=list)
    evictions: list[tuple[str, str, int]] = field(default_factory=list)
    failing: int | None = None  # every request answered with this status
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *objects: dict) -> None:
        for obj in objects:
            meta = obj["metadata"]
            if "nodeName" in obj.get("spec", {}):
                self.pods[(meta["namespace"], meta["name"])] = obj
            else:
                self.nodes[meta["name"]] = obj

    def evict(self, namespace: str, name: str) -> tuple[int, dict]:
        target = self.pods.get((namespace, name))
        if target is None:
            return self._answer(namespace, name, 404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        labels = target["metadata"]["labels"]
        for budget in self.budgets:
            selected = budget.namespace == namespace and all(labels.get(k) == v for k, v in budget.match_labels.items())
            if selected and budget.refusals != 0:
                budget.refusals -= budget.refusals > 0
                body = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
                        "message": "Cannot evict pod as it would violate the pod's disruption budget."}
                return self._answer(namespace, name, 429, body)
        del self.pods[(namespace, name)]
        return self._answer(namespace, name, 201, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def _answer(self, namespace: str, name: str, code: int, body: dict) -> tuple[int, dict]:
        self.evictions.append((namespace, name, code))
        return code, body


def merge(target: dict, patch: dict) -> None:
    """A strategic merge patch as far as the drain uses it: maps merge, None removes a key."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value


class _Handler(BaseHTTPRequestHandler):
    cluster: FakeCluster

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def _failed(self) -> bool:
        """Answer with the cluster's `failing` status, if set (True: answered)."""
        if self.cluster.failing is None:
            return False
        code = self.cluster.failing
        self._send(code, {"kind": "Status", "code": code, "reason": "ServiceUnavailable"})
        return True

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        url = urlsplit(self.path)
        if self._failed():
            return None
        with self.cluster.lock:
            if url.path == "/api/v1/nodes":
                return self._send(200, {"kind": "NodeList", "metadata": {}, "items": list(self.cluster.nodes.values())})
            if match := re.fullmatch(r"/api/v1/nodes/([^/]+)", url.path):
                found = self.cluster.nodes.get(match[1])
                return self._send(200, found) if found else self._send(404, {"kind": "Status", "code": 404})
            if url.path == "/api/v1/pods":
                selector = parse_qs(url.query).get("fieldSelector", [""])[0]
                on = selector.removeprefix("spec.nodeName=")
                items = [p for p in self.cluster.pods.values() if p["spec"]["nodeName"] == on]
                return self._send(200, {"kind": "PodList", "metadata": {}, "items": items})
            if match := re.fullmatch(r"/apis/policy/v1/namespaces/([^/]+)/poddisruptionbudgets", url.path):
                items = [b.as_dict() for b in self.cluster.budgets if b.namespace == match[1]]
                return self._send(200, {"kind": "PodDisruptionBudgetList", "metadata": {}, "items": items})
        self._send(404, {"kind": "Status", "code": 404})

    def do_PATCH(self) -> None:  # noqa: N802
        match = re.fullmatch(r"/api/v1/nodes/([^/]+)", urlsplit(self.path).path)
        if self._failed():
            return None
        with self.cluster.lock:
            found = self.cluster.nodes.get(match[1]) if match else None
            if found is None:
                return self._send(404, {"kind": "Status", "code": 404})
            merge(found, self._body())
            self._send(200, found)

    def do_POST(self) -> None:  # noqa: N802
        match = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", urlsplit(self.path).path)
        if not match:
            return self._send(404, {"kind": "Status", "code": 404})
        self._body()
        if self._failed():
            return None
        with self.cluster.lock:
            self._send(*self.cluster.evict(match[1], match[2]))

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def fake_api(cluster: FakeCluster, directory: Path) -> Iterator[Path]:
    """Serve `cluster`; yields an admin kubeconfig for it (in `directory`, where the reset's lock goes too)."""
    handler = type("Handler", (_Handler,), {"cluster": cluster})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "admin", "user": {"token": "fake"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
    }))
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()
