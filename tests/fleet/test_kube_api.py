"""KubeFleetApi through the official client's ApiClient against a small HTTP API on 127.0.0.1: the paths, patch
types and bodies it sends, list pages, the watch stream, 409/404/410 handling and an interrupted watch."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from numalab.fleet.kube_api import ApiError, Expired, KubeFleetApi, api_client

NRT = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


class Api:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.nodes: dict[str, dict] = {}
        self.nrts: dict[str, dict] = {}
        self.pods = [{"metadata": {"name": f"p{i}", "namespace": "default"}} for i in range(5)]
        self.watch_lines: list[bytes] = []
        self.hold_watch = threading.Event()


def handler(api: Api):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = -1  # headers and body in one segment: no Nagle wait on loopback

        def log_message(self, *args):
            pass

        def answer(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def handle_any(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            api.requests.append({"method": self.command, "path": url.path, "query": query, "body": body,
                                 "type": self.headers.get("Content-Type"), "auth": self.headers.get("Authorization")})
            path, method = url.path, self.command
            if path == "/api/v1/nodes" and method == "POST":
                name = body["metadata"]["name"]
                if name in api.nodes:
                    return self.answer(409, {"kind": "Status", "code": 409, "message": "already exists"})
                api.nodes[name] = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
                return self.answer(201, api.nodes[name])
            if path == "/api/v1/nodes" and method == "GET":
                return self.answer(200, {"items": list(api.nodes.values()), "metadata": {"resourceVersion": "5"}})
            if path.startswith("/api/v1/nodes/"):
                return self.answer(200, api.nodes[path.rsplit("/", 1)[1]])
            if path == NRT and method == "POST":
                name = body["metadata"]["name"]
                if name in api.nrts:
                    return self.answer(409, {"kind": "Status", "code": 409, "message": "already exists"})
                api.nrts[name] = body
                return self.answer(201, body)
            if path.startswith(NRT + "/") and method == "PATCH":
                name = path.rsplit("/", 1)[1]
                if name not in api.nrts:
                    return self.answer(404, {"kind": "Status", "code": 404, "message": "not found"})
                api.nrts[name] = {**api.nrts[name], **body}
                return self.answer(200, api.nrts[name])
            if path == "/api/v1/pods" and query.get("watch") == "true":
                return self.stream()
            if path == "/api/v1/pods":
                start = int(query.get("continue", 0))
                end = start + int(query["limit"])
                page = {"items": api.pods[start:end], "metadata": {"resourceVersion": "77"}}
                if end < len(api.pods):
                    page["metadata"]["continue"] = str(end)
                return self.answer(200, page)
            if path == "/api/v1/namespaces/bench/pods" and method == "GET":
                return self.answer(200, {"items": api.pods[:int(query.get("limit", 500))], "metadata": {}})
            if "/pods/" in path and method == "PATCH" and path.rsplit("/", 2)[1] == "gone":
                return self.answer(404, {"kind": "Status", "code": 404, "message": 'pods "gone" not found'})
            return self.answer(200, {})

        def stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in api.watch_lines:
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            api.hold_watch.wait(5)
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PATCH = do_DELETE = handle_any

    return Handler


@contextmanager
def serving():
    api = Api()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(api))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    configuration.api_key = {"BearerToken": "Bearer sekret"}
    try:
        yield api, KubeFleetApi(client.ApiClient(configuration), timeout=5, watch_seconds=5)
    finally:
        api.hold_watch.set()
        server.shutdown()
        server.server_close()


def event(kind: str, obj: dict) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def test_nodes_and_objects_created_or_taken_over():
    with serving() as (api, fleet):
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
        assert fleet.create_node(node) == "uid-n1"
        assert fleet.create_node(node) == "uid-n1"  # 409: the existing Node's uid
        assert [(r["method"], r["path"]) for r in api.requests] == [
            ("POST", "/api/v1/nodes"), ("POST", "/api/v1/nodes"), ("GET", "/api/v1/nodes/n1")]
        assert api.requests[0]["auth"] == "Bearer sekret"
        nrt = {"metadata": {"name": "n1", "ownerReferences": [{"uid": "uid-n1"}], "annotations": {"a": "1"}},
               "zones": [{"name": "node-0"}], "attributes": [{"name": "x", "value": "1"}]}
        fleet.put_nrt(nrt)
        fleet.put_nrt(nrt)  # 409: patched instead
        patch = api.requests[-1]
        assert (patch["method"], patch["path"], patch["type"]) == ("PATCH", f"{NRT}/n1", "application/merge-patch+json")
        assert patch["body"] == {"metadata": {"annotations": {"a": "1"}, "ownerReferences": [{"uid": "uid-n1"}]},
                                 "zones": [{"name": "node-0"}], "attributes": [{"name": "x", "value": "1"}]}
        del api.nrts["n1"]
        fleet.patch_nrt(nrt)  # 404: created again
        assert api.requests[-1]["method"] == "POST" and "n1" in api.nrts


def test_pod_status_patch_and_deletion():
    with serving() as (api, fleet):
        fleet.patch_pod_status("ns", "p", {"status": {"phase": "Running"}})
        request = api.requests[-1]
        assert (request["path"], request["type"]) == ("/api/v1/namespaces/ns/pods/p/status",
                                                      "application/strategic-merge-patch+json")
        assert request["body"] == {"status": {"phase": "Running"}}
        with pytest.raises(ApiError) as caught:
            fleet.patch_pod_status("ns", "gone", {"status": {}})
        assert caught.value.status == 404 and 'pods "gone" not found' in str(caught.value)
        fleet.delete_pod("ns", "p", "uid-p")
        assert api.requests[-1]["body"] == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                            "preconditions": {"uid": "uid-p"}}


def test_list_in_pages_and_watch_from_its_version():
    with serving() as (api, fleet):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("numalab.fleet.kube_api.LIST_CHUNK", 2)
            pods, version = fleet.list_bound_pods()
        assert [p["metadata"]["name"] for p in pods] == ["p0", "p1", "p2", "p3", "p4"] and version == "77"
        assert [r["query"].get("continue") for r in api.requests] == [None, "2", "4"]
        assert api.requests[0]["query"]["fieldSelector"] == "spec.nodeName!="
        api.watch_lines = [event("ADDED", {"metadata": {"name": "a", "resourceVersion": "78"}}),
                           event("BOOKMARK", {"metadata": {"resourceVersion": "79"}}),
                           event("DELETED", {"metadata": {"name": "a", "resourceVersion": "80"}})]
        api.hold_watch.set()
        seen = list(fleet.watch_bound_pods("77"))
        assert [(kind, obj["metadata"]["resourceVersion"]) for kind, obj in seen] == [
            ("ADDED", "78"), ("BOOKMARK", "79"), ("DELETED", "80")]
        query = api.requests[-1]["query"]
        assert (query["watch"], query["resourceVersion"], query["fieldSelector"]) == ("true", "77", "spec.nodeName!=")


def test_an_expired_version_says_list_again():
    with serving() as (api, fleet):
        api.watch_lines = [event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})]
        with pytest.raises(Expired):
            list(fleet.watch_bound_pods("1"))


def test_interrupt_ends_a_quiet_watch():
    with serving() as (api, fleet):
        api.watch_lines = [event("ADDED", {"metadata": {"name": "a"}})]
        got = []

        def watch():
            try:
                got.extend(fleet.watch_bound_pods("1"))
            except ApiError:
                got.append("ended")

        thread = threading.Thread(target=watch)
        thread.start()
        deadline = time.monotonic() + 5
        while fleet._watching is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        started = time.monotonic()
        fleet.interrupt()
        thread.join(5)
        assert not thread.is_alive() and time.monotonic() - started < 2
        assert got and got[0][0] == "ADDED"


def test_interrupt_after_the_watch_closed_its_socket_is_no_error():
    """The watch can end and close its socket between interrupt()'s read of it and its shutdown (seen once in
    make test: urllib3's shutdown of a closed SSL socket raised EBADF out of a side's teardown)."""
    class Closed:
        def shutdown(self) -> None:
            raise OSError(9, "Bad file descriptor")

        close = shutdown

    with serving() as (_, fleet):
        fleet._watching = Closed()
        fleet.interrupt()


def test_the_benchs_workload_created():
    with serving() as (api, fleet):
        fleet.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "bench"}})
        fleet.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})
        assert [(r["method"], r["path"]) for r in api.requests] == [
            ("POST", "/api/v1/namespaces/bench/pods"), ("POST", "/apis/apps/v1/namespaces/default/deployments")]


def test_ready_nodes_and_an_annotation_set_on_an_object():
    with serving() as (api, fleet):
        ready = {"type": "Ready", "status": "True"}
        api.nodes = {"a": {"status": {"conditions": [ready]}}, "b": {"status": {"conditions": [
            {**ready, "status": "Unknown"}]}}, "c": {"status": {}}}
        assert fleet.ready_nodes() == 1
        api.nrts["n1"] = {"metadata": {"name": "n1", "annotations": {"numa-align/allocations": "{}"}}}
        fleet.annotate_nrt("n1", "numa-lab/bench-nudge", "default-1")
        request = api.requests[-1]
        assert (request["method"], request["path"], request["type"]) == (
            "PATCH", f"{NRT}/n1", "application/merge-patch+json")
        assert request["body"] == {"metadata": {"annotations": {"numa-lab/bench-nudge": "default-1"}}}


def test_api_client_sizes_its_pool_from_a_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "admin.conf"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: "
        "'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    client = api_client(kubeconfig, connections=24)
    assert client.configuration.host == "https://127.0.0.1:6443"
    assert client.configuration.connection_pool_maxsize == 24
    assert client.rest_client.pool_manager.connection_pool_kw["maxsize"] == 24
