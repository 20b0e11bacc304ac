"""A tiny Kubernetes API server on 127.0.0.1 for numa-align's NRT publishing: Nodes (get), cluster-scoped
NodeResourceTopology objects (get, create, replace with resourceVersion checks) and the failures the
publisher must survive: the CRD not installed (a plain 404 for every NRT path, as the API server answers
for a path it does not serve), 403 for chosen verbs, a wrong token (401), a Node deleted (its NRT objects
collected with it, as the garbage collector does) and another writer (`touch`). Also Leases (get, create,
replace), the pods of a node (listed whole by field selector: the auditor's list), Events (create
only: 409 for a name taken, 500 while `events_failing`), resources answered 403 as a whole
(`forbidden_resources`), and a count of the connections it accepted, keeping each open for more requests
(HTTP/1.1) as the API server does.

Plain HTTP by default; HTTPS with client-certificate authentication when given `Pki` (fakepki.py).
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from numa_align.nrt_api import CRD_NAME, GROUP, PLURAL, VERSION

from tests.plugin.fakepki import Pki

NRT_PATH = re.compile(rf"/apis/{re.escape(GROUP)}/{VERSION}/{PLURAL}(?:/([^/]+))?")
NODE_PATH = re.compile(r"/api/v1/nodes/([^/]+)")
LEASE_PATH = re.compile(r"/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?")
PODS_PATH = "/api/v1/pods"
EVENTS_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/events")
VERBS = {"GET": "get", "POST": "create", "PUT": "update"}


def status(code: int, reason: str, message: str, name: str = "", kind: str = "") -> dict[str, Any]:
    details = {"name": name, "group": GROUP if kind != "nodes" else "", "kind": kind} if name else {}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details, "code": code}


@dataclass
class FakeKube:
    """The cluster's state; `writes` lists every NRT write that succeeded as (verb, name)."""

    nodes: dict[str, str] = field(default_factory=dict)
    """Node name -> uid."""
    nrts: dict[str, dict[str, Any]] = field(default_factory=dict)
    crd_installed: bool = True
    forbidden: set[str] = field(default_factory=set)
    """NRT verbs answered 403 (get, create, update)."""
    token: str | None = None
    """When set, a request needs this bearer token or a client certificate (401 otherwise)."""
    writes: list[tuple[str, str]] = field(default_factory=list)
    lease_writes: list[tuple[str, str]] = field(default_factory=list)
    """Every Lease write that succeeded as (verb, name)."""
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, who): who is 'token <t>', 'cert <CN>' or 'anonymous'."""
    version: int = 100
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(namespace, name) -> Lease."""
    pods: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(namespace, name) -> (node, phase)."""
    pod_details: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(namespace, name) -> {"uid": ..., "status": {...}} merged into whole Pods listed (the auditor's list)."""
    forbidden_resources: set[str] = field(default_factory=set)
    """Resources answered 403 for every verb: 'leases', 'pods', 'events'."""
    events: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(namespace, name) -> Event."""
    events_failing: bool = False
    """Answer 500 to Event creates (etcd busy under the API server)."""
    down: bool = False
    """Answer 503 to everything (an API server restarting behind a load balancer)."""
    connections: int = 0
    """Connections accepted (with TLS: handshakes)."""
    open_sockets: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def drop_connections(self) -> None:
        """Close every connection accepted so far, as an API server does with idle ones (or when restarted)."""
        with self.lock:
            for sock in self.open_sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.open_sockets.clear()

    def set_pod(self, namespace: str, name: str, node: str, phase: str = "Running") -> None:
        with self.lock:
            self.pods[(namespace, name)] = (node, phase)

    def add_node(self, name: str) -> str:
        with self.lock:
            self.nodes[name] = uid = str(uuid.uuid4())
        return uid

    def delete_node(self, name: str) -> None:
        """Delete the Node and, as the garbage collector does, the objects it owns."""
        with self.lock:
            uid = self.nodes.pop(name)
            for key, obj in list(self.nrts.items()):
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences", [])):
                    del self.nrts[key]

    def touch(self, name: str) -> None:
        """Another writer changed the object: its resourceVersion moves on."""
        with self.lock:
            self.version += 1
            self.nrts[name]["metadata"]["resourceVersion"] = str(self.version)

    def answer(self, method: str, path: str, who: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        with self.lock:
            self.seen.append((method, path, who))
            if self.down:
                return 503, status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            if self.token is not None and who != f"token {self.token}" and not who.startswith("cert "):
                return 401, status(401, "Unauthorized", "Unauthorized")
            path, _, query = path.partition("?")
            if match := LEASE_PATH.fullmatch(path):
                return self._lease(method, match[1], match[2] or (body or {}).get("metadata", {}).get("name", ""),
                                   who, body)
            if match := EVENTS_PATH.fullmatch(path):
                return self._event(method, match[1], body or {}, who)
            if path == PODS_PATH:
                return self._pods(dict(parse_qsl(query)), who)
            if match := NODE_PATH.fullmatch(path):
                uid = self.nodes.get(match[1])
                if method != "GET" or uid is None:
                    return 404, status(404, "NotFound", f'nodes "{match[1]}" not found', match[1], "nodes")
                return 200, {"kind": "Node", "apiVersion": "v1", "metadata": {"name": match[1], "uid": uid}}
            match = NRT_PATH.fullmatch(path)
            if match is None or not self.crd_installed:
                return 404, "404 page not found\n"
            return self._nrt(method, match[1] or (body or {}).get("metadata", {}).get("name", ""), who, body)

    def _nrt(self, method: str, name: str, who: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        verb = VERBS[method]
        if verb in self.forbidden:
            return 403, status(403, "Forbidden", f'{CRD_NAME} "{name}" is forbidden: User "{who}" cannot {verb} '
                                                 f'resource "{PLURAL}" in API group "{GROUP}" at the cluster scope',
                                                 name, PLURAL)
        stored = self.nrts.get(name)
        missing = status(404, "NotFound", f'{CRD_NAME} "{name}" not found', name, PLURAL)
        if method == "GET":
            return (200, copy.deepcopy(stored)) if stored else (404, missing)
        assert body is not None
        if method == "POST":
            if stored:
                return 409, status(409, "AlreadyExists", f'{CRD_NAME} "{name}" already exists', name, PLURAL)
            return self._store(name, body, verb, {"uid": str(uuid.uuid4()), "creationTimestamp": _now()})
        if stored is None:
            return 404, missing
        given = body.get("metadata", {}).get("resourceVersion")
        if not given:
            return 422, status(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                               "for an update")
        if given != stored["metadata"]["resourceVersion"]:
            return 409, status(409, "Conflict", f'Operation cannot be fulfilled on {CRD_NAME} "{name}": the object '
                                                "has been modified; please apply your changes to the latest version "
                                                "and try again", name, PLURAL)
        kept = {key: stored["metadata"][key] for key in ("uid", "creationTimestamp")}
        return self._store(name, body, verb, kept)

    def _forbidden(self, resource: str, verb: str, who: str, name: str = "") -> tuple[int, Any]:
        return 403, status(403, "Forbidden", f'{resource} "{name}" is forbidden: User "{who}" cannot {verb} '
                                             f'resource "{resource}"', name, resource)

    def _lease(self, method: str, namespace: str, name: str, who: str,
               body: dict[str, Any] | None) -> tuple[int, Any]:
        if "leases" in self.forbidden_resources:
            return self._forbidden("leases", VERBS[method], who, name)
        key = (namespace, name)
        stored = self.leases.get(key)
        if method == "GET":
            if stored is None:
                return 404, status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found', name, "leases")
            return 200, copy.deepcopy(stored)
        assert body is not None
        if method == "POST":
            if stored is not None:
                return 409, status(409, "AlreadyExists", f'leases "{name}" already exists', name, "leases")
        elif stored is None:
            return 404, status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found', name, "leases")
        elif body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            return 409, status(409, "Conflict", f'Operation cannot be fulfilled on leases "{name}"', name, "leases")
        self.version += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.leases[key] = obj
        self.lease_writes.append((VERBS[method], name))
        return (201 if method == "POST" else 200), copy.deepcopy(obj)

    def _event(self, method: str, namespace: str, body: dict[str, Any], who: str) -> tuple[int, Any]:
        name = body.get("metadata", {}).get("name", "")
        if "events" in self.forbidden_resources:
            return self._forbidden("events", VERBS[method], who, name)
        if method != "POST" or self.events_failing:
            return 500, status(500, "InternalError", "etcdserver: request timed out")
        if (namespace, name) in self.events:
            return 409, status(409, "AlreadyExists", f'events "{name}" already exists', name, "events")
        self.events[(namespace, name)] = copy.deepcopy(body)
        return 201, copy.deepcopy(body)

    def _pods(self, query: dict[str, str], who: str) -> tuple[int, Any]:
        if "pods" in self.forbidden_resources:
            return self._forbidden("pods", "list", who)
        wanted = dict(term.split("=", 1) for term in query.get("fieldSelector", "").split(",") if term)
        items = []
        for (namespace, name), (node, phase) in sorted(self.pods.items()):
            if wanted.get("spec.nodeName", node) == node and wanted.get("status.phase", phase) == phase:
                details = self.pod_details.get((namespace, name), {})
                items.append({"kind": "Pod", "metadata": {"namespace": namespace, "name": name,
                                                          "uid": details.get("uid", "")},
                              "spec": {"nodeName": node}, "status": {"phase": phase, **details.get("status", {})}})
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.version)},
                     "items": items}

    def _store(self, name: str, body: dict[str, Any], verb: str, kept: dict[str, str]) -> tuple[int, Any]:
        self.version += 1
        obj = copy.deepcopy(body)
        obj["metadata"].update(kept, resourceVersion=str(self.version))
        self.nrts[name] = obj
        self.writes.append((verb, name))
        return (201 if verb == "create" else 200), copy.deepcopy(obj)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKube
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server

    def setup(self) -> None:
        super().setup()
        with self.fake.lock:
            self.fake.connections += 1
            self.fake.open_sockets.append(self.connection)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        auth = self.headers.get("Authorization", "")
        who = f"token {auth[7:]}" if auth.startswith("Bearer ") else "anonymous"
        if isinstance(self.connection, ssl.SSLSocket) and self.connection.getpeercert():
            subject = dict(item[0] for item in self.connection.getpeercert()["subject"])
            who = f"cert {subject['commonName']}"
        code, answer = self.fake.answer(self.command, self.path, who, body)
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _serve  # http.server's names

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_kube(fake: FakeKube, pki: Pki | None = None) -> Iterator[str]:
    """Serve `fake` until the block ends; yields its URL (https:// with `pki`, asking for client certificates)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"fake": fake}))
    scheme = "http"
    if pki is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.directory / "server.crt", pki.directory / "server.key")
        context.load_verify_locations(pki.ca)
        context.verify_mode = ssl.CERT_OPTIONAL
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="fake-kube", daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        fake.drop_connections()  # kept-alive connections end with the server


def kubeconfig_text(server: str, user: dict[str, str] | None = None, cluster: dict[str, str] | None = None) -> str:
    """A kubeconfig in kubectl's block style (sequences at their key's column) for one cluster and user."""
    def entries(values: dict[str, str], indent: str) -> str:
        return "".join(f"{indent}{key}: {value}\n" for key, value in values.items())

    return ("apiVersion: v1\nclusters:\n- cluster:\n" + entries({"server": server} | (cluster or {}), "    ")
            + "  name: fake\ncontexts:\n- context:\n    cluster: fake\n    user: numa-align\n  name: numa-align@fake\n"
            + "current-context: numa-align@fake\nkind: Config\npreferences: {}\nusers:\n- name: numa-align\n"
            + ("  user:\n" + entries(user, "    ") if user else "  user: {}\n"))
