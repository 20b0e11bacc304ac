"""An API server that restarts mid-run (connections refused for a while) is waited for and reported, not a
failure of every case after it; any other error still reaches the case at once."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest
import urllib3

from e2e import kube
from tests.e2e_logic.conftest import load_e2e_module

api_outages = load_e2e_module("api_outages")
OutageRetry = api_outages.OutageRetry


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def do_POST(self):  # noqa: N802
        self.do_GET()

    def log_message(self, *args):
        pass


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def outages(monkeypatch):
    fresh = api_outages.Outages()
    monkeypatch.setattr(api_outages, "record", fresh)
    return fresh


def test_a_refused_connection_is_retried_until_the_server_is_back_and_reported(outages) -> None:
    port = closed_port()
    servers: list[http.server.HTTPServer] = []

    def start_later() -> None:
        time.sleep(1.5)
        server = http.server.HTTPServer(("127.0.0.1", port), Ok)
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=start_later, daemon=True).start()
    pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.2, backoff_max=0.5))
    try:
        answer = pool.request("POST", f"http://127.0.0.1:{port}/api/v1/namespaces", body=b"{}")
    finally:
        for server in servers:
            server.shutdown()
    assert answer.status == 200 and answer.data == b"ok"  # a POST too: a refused connection sent nothing
    assert outages.refused, "the refusals before the server came up were not recorded"
    assert "refused" in outages.summary() and f"{len(outages.refused)} request(s)" in outages.summary()


def test_the_wait_has_an_end_naming_the_refusal(outages) -> None:
    pool = urllib3.PoolManager(retries=OutageRetry(connect=3, backoff_factor=0.0))
    with pytest.raises(urllib3.exceptions.MaxRetryError, match="refused"):
        pool.request("GET", f"http://127.0.0.1:{closed_port()}/readyz")
    assert len(outages.refused) == 4  # the first attempt and 3 retries, each recorded


def test_an_answer_of_any_status_is_the_cases_to_judge_at_once(outages) -> None:
    class Unavailable(Ok):
        def do_GET(self):  # noqa: N802
            self.send_response(503)
            self.end_headers()

    server = http.server.HTTPServer(("127.0.0.1", 0), Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        answer = pool.request("GET", f"http://127.0.0.1:{server.server_address[1]}/readyz")
    finally:
        server.shutdown()
    assert answer.status == 503 and outages.refused == [] and outages.summary() == ""


def test_an_answer_deferred_with_retry_after_is_asked_again_after_the_time_it_gives(outages) -> None:
    """What a starting kube-apiserver answers before its storage is ready: 503 with Retry-After, then 201."""
    answers = [503, 429, 201]
    seen: list[str] = []

    class Starting(Ok):
        def do_POST(self):  # noqa: N802
            seen.append(self.path)
            status = answers.pop(0)
            self.send_response(status)
            if status != 201:
                self.send_header("Retry-After", "1")
            self.end_headers()

    server = http.server.HTTPServer(("127.0.0.1", 0), Starting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.monotonic()
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        answer = pool.request("POST", f"http://127.0.0.1:{server.server_address[1]}/api/v1/pods", body=b"{}")
    finally:
        server.shutdown()
    assert answer.status == 201 and len(seen) == 3
    assert time.monotonic() - started >= 2  # Retry-After: 1, twice
    assert [error.split(": ")[-1] for _, error in outages.refused] == ["HTTP 503, Retry-After 1",
                                                                       "HTTP 429, Retry-After 1"]


def test_connect_keeps_one_attempt_for_the_first_contact_then_waits_out_outages(tmp_path) -> None:
    """An absent cluster still stops the run at once: the retrying client is handed out only after contact."""
    port = closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    started = time.monotonic()
    with pytest.raises(kube.ClusterUnreachable, match=f"no API server answers at http://127.0.0.1:{port}"):
        kube.connect(kubeconfig)
    assert time.monotonic() - started < 5


def test_bound_unfinished_pods_come_from_one_list_grouped_by_node() -> None:
    from types import SimpleNamespace as NS

    asked = []

    class Core:
        def list_pod_for_all_namespaces(self, field_selector):
            asked.append(field_selector)
            pod = lambda ns, name, node: NS(metadata=NS(namespace=ns, name=name), spec=NS(node_name=node))  # noqa: E731
            return NS(items=[pod("kube-system", "coredns-1", "worker-3"), pod("e2e", "p-1", "worker-1"),
                             pod("e2e", "p-9", "server")])

    cluster = kube.Cluster.__new__(kube.Cluster)
    cluster.core = Core()
    assert cluster.bound_pods(["worker-1", "worker-3"]) == {"worker-1": [("e2e", "p-1")],
                                                            "worker-3": [("kube-system", "coredns-1")]}
    assert asked == ["status.phase!=Succeeded,status.phase!=Failed"]  # a Pending pod bound there counts too


def started(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.HTTPServer:
    """A server on a free loopback port, answering from a thread; the caller shuts it down."""
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def cut_once_server(answered: list[str]) -> http.server.HTTPServer:
    """Closes the connection of the first request with no answer (a kube-apiserver stopped under it), then
    answers 200."""
    class CutOnce(Ok):
        def _serve(self):
            answered.append(self.command)
            if len(answered) == 1:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_DELETE = do_POST = _serve  # noqa: N815

    return started(CutOnce)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_an_idempotent_request_cut_off_by_a_stopping_server_is_sent_again(outages, method: str) -> None:
    answered: list[str] = []
    server = cut_once_server(answered)
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        answer = pool.request(method, f"http://127.0.0.1:{server.server_address[1]}/api/v1/pods/x")
    finally:
        server.shutdown()
    assert answer.status == 200 and answered == [method, method]
    assert len(outages.refused) == 1 and method in outages.refused[0][1]


def test_a_create_cut_off_is_not_sent_again_by_the_client(outages) -> None:
    answered: list[str] = []
    server = cut_once_server(answered)
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        with pytest.raises(urllib3.exceptions.ProtocolError):
            pool.request("POST", f"http://127.0.0.1:{server.server_address[1]}/api/v1/pods", body=b"{}")
    finally:
        server.shutdown()
    assert answered == ["POST"]  # it may have happened: Cluster.create_* look before creating again


def test_a_cut_off_create_is_looked_for_before_it_is_made_again() -> None:
    from kubernetes.client.rest import ApiException

    calls: list[str] = []
    exists = {"after": False}

    def create() -> None:
        calls.append("create")
        if len(calls) == 1:
            raise urllib3.exceptions.ProtocolError("Connection aborted.")

    def read() -> None:
        calls.append("read")
        if not exists["after"]:
            raise ApiException(status=404)

    kube.created(create, read)
    assert calls == ["create", "read", "create"]  # not there: made again
    calls.clear()
    exists["after"] = True
    kube.created(create, read)
    assert calls == ["create", "read"]  # there: the first attempt made it

    def conflict() -> None:
        raise ApiException(status=409)
    with pytest.raises(ApiException):
        kube.created(conflict, read)  # a name taken before any cut is the case's to judge


def storage_error_server(answers: list[int], seen: list[str]) -> http.server.HTTPServer:
    """Answers each request with the next status of `answers` (200 once they run out), as kube-apiserver does
    while its etcd restarts: 500 with etcd's 'Unavailable' first."""
    class Storage(Ok):
        def _serve(self):
            seen.append(self.command)
            status = answers.pop(0) if answers else 200
            self.send_response(status)
            self.end_headers()
            if status == 500:
                self.wfile.write(b'{"message":"rpc error: code = Unavailable desc = error reading from server: EOF"}')

        do_GET = do_DELETE = do_POST = _serve  # noqa: N815

    return started(Storage)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_an_idempotent_request_met_by_a_storage_error_is_sent_again(outages, method: str) -> None:
    seen: list[str] = []
    server = storage_error_server([500, 504], seen)
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        answer = pool.request(method, f"http://127.0.0.1:{server.server_address[1]}/api/v1/pods/x")
    finally:
        server.shutdown()
    assert answer.status == 200 and seen == [method] * 3
    assert [error.split(": ")[-1] for _, error in outages.refused] == ["HTTP 500", "HTTP 504"]


def test_storage_errors_have_an_end_and_a_create_is_never_sent_twice_by_the_client(outages) -> None:
    seen: list[str] = []
    server = storage_error_server([500] * 20, seen)
    try:
        pool = urllib3.PoolManager(retries=OutageRetry(backoff_factor=0.0))
        url = f"http://127.0.0.1:{server.server_address[1]}/api/v1/pods"
        assert pool.request("GET", url).status == 500  # the case judges it
        assert len(seen) == api_outages.OUTAGE_SERVER_ERRORS + 1
        seen.clear()
        assert pool.request("POST", url, body=b"{}").status == 500 and seen == ["POST"]  # kube.created looks
    finally:
        server.shutdown()


def test_a_create_answered_with_a_storage_error_is_looked_for_before_it_is_made_again() -> None:
    from kubernetes.client.rest import ApiException

    calls: list[str] = []

    def create() -> None:
        calls.append("create")
        if len(calls) == 1:
            raise ApiException(status=500, reason="Internal Server Error")

    def read() -> None:
        calls.append("read")
        raise ApiException(status=404)

    kube.created(create, read)
    assert calls == ["create", "read", "create"]


def test_pods_made_before_a_failed_create_are_deleted_with_it() -> None:
    """A case's set-up that fails half-way leaves no pod holding CPUs for the cases after it."""
    from kubernetes.client.rest import ApiException

    made: list[str] = []
    deleted: list[str] = []

    class Core:
        def create_namespaced_pod(self, namespace, body):
            if body["metadata"]["name"] == "b":
                raise ApiException(status=403, reason="Forbidden")
            made.append(body["metadata"]["name"])

        def read_namespaced_pod(self, name, namespace):
            raise ApiException(status=404)

    cluster = kube.Cluster.__new__(kube.Cluster)
    cluster.core, cluster.namespace = Core(), "e2e"
    cluster.delete_pods = lambda names, wait=120.0: deleted.extend(names)
    with pytest.raises(ApiException, match="Forbidden"):
        cluster.create_pods([{"metadata": {"name": n}} for n in ("a", "b", "c")])
    assert made == ["a"] and deleted == ["a", "b"]


def waiting_cluster(outages, away_reads: int, ready_after: int, timeout: float) -> kube.Cluster:
    """A Cluster whose pod reads each take 0.1 s; the first `away_reads` of them met a refusing API server
    (recorded, as OutageRetry does), and the probe's output is there from read `ready_after` on."""
    reads = []
    cluster = kube.Cluster.__new__(kube.Cluster)
    cluster.pod_timeout = timeout

    def pod(name):
        reads.append(name)
        time.sleep(0.1)
        if len(reads) <= away_reads:
            outages.add("GET /api/v1/pods/p: Connection refused")
        return {"status": {"phase": "Pending"}}

    cluster.pod = pod
    cluster._log = lambda name, container: (f"{kube.PROBE_END}\n" if len(reads) >= ready_after else "")
    cluster.explain = lambda name: f"pod {name} Pending"
    return cluster


def test_a_pods_wait_does_not_count_the_time_the_api_server_was_away(outages, monkeypatch) -> None:
    """The lab's e2e run at 69adab0 failed a pod whose only trouble was a restarting API server: its 180 s
    ran out while neither the case nor the kubelet could reach the server."""
    monkeypatch.setattr(kube, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(kube, "parse_probe_output", lambda text: "parsed")
    # 0.5 s allowed; the server is away for the first 10 reads (1 s), the output is there at read 12
    cluster = waiting_cluster(outages, away_reads=10, ready_after=12, timeout=0.5)
    assert cluster.wait_for_probes("p", ["app"]) == {"app": "parsed"}
    # the baseline: the same wait with the server there all along runs out, naming its limit
    cluster = waiting_cluster(api_outages.Outages(), away_reads=0, ready_after=12, timeout=0.5)
    monkeypatch.setattr(api_outages, "record", api_outages.Outages())
    with pytest.raises(kube.PodTrouble, match=r"no probe output after 0s: pod p Pending"):
        cluster.wait_for_probes("p", ["app"])


def test_a_deadline_gives_back_only_time_that_saw_a_refusal(outages) -> None:
    deadline = api_outages.Deadline(0.2)
    assert deadline.describe() == "0s"
    time.sleep(0.3)
    outages.add("GET /readyz: Connection refused")  # the 0.3 s just passed were the server's
    assert not deadline.passed() and deadline.given_back >= 0.3
    assert deadline.describe() == f"0s plus {deadline.given_back:.0f}s the API server was away"
    time.sleep(0.25)  # no refusal now: this time counts
    assert deadline.passed()
