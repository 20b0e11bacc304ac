"""The Prometheus case's reading: one instant query for one cell of one node, its answer parsed, and every
way of not getting a value named with the URL (asked of a small local HTTP server standing in for Prometheus)."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.e2e_logic.conftest import load_e2e_module

case = load_e2e_module("prometheus")
QUERY = 'numa_align_node_pods_pinned{job="numa-align",kubernetes_node="worker-1",node="0"}'


def vector(*values: str) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": case.GAUGE, "node": "0", "kubernetes_node": "worker-1"}, "value": [1.7e9, v]}
        for v in values]}}


def test_the_query_names_the_job_the_node_and_the_cell() -> None:
    assert case.pods_pinned_query("worker-1", 0) == QUERY
    url = case.query_url("http://10.77.0.10:9090/", QUERY)
    assert url.startswith("http://10.77.0.10:9090/api/v1/query?query=")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(url).query) == {"query": [QUERY]}


def test_an_answer_gives_its_one_value_or_none() -> None:
    assert case.instant_value(vector("2")) == 2.0
    assert case.instant_value(vector()) is None
    with pytest.raises(case.PrometheusError, match="2 series match"):
        case.instant_value(vector("1", "1"))
    with pytest.raises(case.PrometheusError, match="bad_data: parse error"):
        case.instant_value({"status": "error", "errorType": "bad_data", "error": "parse error"})
    with pytest.raises(case.PrometheusError, match="'matrix', expected a vector"):
        case.instant_value({"status": "success", "data": {"resultType": "matrix", "result": []}})


def test_the_gauge_must_count_the_pinned_pod() -> None:
    assert case.judge_gauge(case.Reading(QUERY, 1.0)) == []
    assert case.judge_gauge(case.Reading(QUERY, 2.0)) == []
    assert "expected >= 1" in case.judge_gauge(case.Reading(QUERY, 0.0))[0]
    assert "no series" in case.judge_gauge(case.Reading(QUERY))[0]
    assert case.judge_gauge(case.Reading(QUERY, error="GET x: refused")) == ["GET x: refused"]
    assert case.gauge_summary(case.Reading(QUERY, 1.0)) == f"{QUERY} = 1"


class FakePrometheus(BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
        status, body = self.answers[query]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_value_is_read_over_http(prometheus: str) -> None:
    FakePrometheus.answers = {QUERY: (200, json.dumps(vector("1")).encode())}
    assert case.read_pods_pinned(prometheus, "worker-1", 0) == case.Reading(QUERY, 1.0)


def test_http_failures_name_the_url_and_the_error(prometheus: str) -> None:
    bad = {"status": "error", "errorType": "bad_data", "error": "1:2: parse error"}
    FakePrometheus.answers = {QUERY: (400, json.dumps(bad).encode())}
    reading = case.read_pods_pinned(prometheus, "worker-1", 0)
    assert reading.value is None and reading.error.startswith(f"GET {prometheus}/api/v1/query?query=")
    assert reading.error.endswith("bad_data: 1:2: parse error")
    FakePrometheus.answers = {QUERY: (503, b"Service Unavailable")}
    assert case.read_pods_pinned(prometheus, "worker-1", 0).error.endswith("HTTP 503 Service Unavailable")
    FakePrometheus.answers = {QUERY: (200, b"<html>")}
    assert "GET http://127.0.0.1" in case.read_pods_pinned(prometheus, "worker-1", 0).error


def test_nobody_listening_is_an_error_naming_the_url() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reading = case.read_pods_pinned(f"http://127.0.0.1:{port}", "worker-1", 1)
    assert reading.error.startswith(f"GET http://127.0.0.1:{port}/api/v1/query") and "refused" in reading.error
