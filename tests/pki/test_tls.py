"""The certificates work in real TLS: the registry cert for its name only, the admin kubeconfig over mutual TLS.

Servers bind 127.0.0.1 on a free port, serve in a thread with a socket timeout and stop by themselves.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from kubernetes import client, config

from numalab.pki import ClusterPki, Host, ensure_pki
from tests.pki.conftest import lab_spec

TIMEOUT = 10


def server_context(pki: ClusterPki, name: str, client_ca: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.path(f"{name}.crt"), pki.path(f"{name}.key"))
    if client_ca:
        context.load_verify_locations(cafile=pki.path("ca.crt"))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@contextmanager
def tls_echo(context: ssl.SSLContext) -> Iterator[int]:
    """A TLS server on 127.0.0.1 answering each handshake with b'ok'; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    deadline = time.monotonic() + TIMEOUT

    def serve() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(TIMEOUT)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                continue  # the client refused our certificate

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(TIMEOUT)
        listener.close()


def fetch(port: int, ca: Path, server_hostname: str) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        with context.wrap_socket(raw, server_hostname=server_hostname) as tls:
            return tls.recv(2)


def test_registry_cert_serves_its_name_and_address(pki_dir: Path) -> None:
    pki = ensure_pki(lab_spec(registry=Host("registry", "127.0.0.1")), pki_dir)
    with tls_echo(server_context(pki, "registry")) as port:
        assert fetch(port, pki.path("ca.crt"), "registry") == b"ok"
        assert fetch(port, pki.path("ca.crt"), "127.0.0.1") == b"ok"
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            fetch(port, pki.path("ca.crt"), "server")


def test_registry_cert_is_refused_under_another_ca(pki_dir: Path, tmp_path: Path) -> None:
    pki = ensure_pki(lab_spec(), pki_dir)
    stranger = ensure_pki(lab_spec(), tmp_path / "stranger")
    with tls_echo(server_context(pki, "registry")) as port:
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
            fetch(port, stranger.path("ca.crt"), "registry")


class _VersionHandler(BaseHTTPRequestHandler):
    clients: list[dict] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.clients.append(self.connection.getpeercert())
        fields = ("buildDate", "compiler", "gitCommit", "gitTreeState", "goVersion", "platform")
        version = {"major": "1", "minor": "36", "gitVersion": "v1.36.0", **dict.fromkeys(fields, "")}
        body = json.dumps(version).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_admin_kubeconfig_works_over_mutual_tls(pki_dir: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pki = ensure_pki(
        lab_spec(admin_server_url=f"https://127.0.0.1:{port}"), pki_dir, admin_kubeconfig=pki_dir.parent / "kubeconfig"
    )
    httpd = HTTPServer(("127.0.0.1", port), _VersionHandler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = server_context(pki, "apiserver", client_ca=True).wrap_socket(listener, server_side=True)
    httpd.timeout = TIMEOUT
    _VersionHandler.clients = []
    thread = threading.Thread(target=httpd.handle_request, daemon=True)
    thread.start()
    try:
        api = client.VersionApi(config.new_client_from_config(config_file=str(pki.admin_kubeconfig)))
        assert api.get_code(_request_timeout=TIMEOUT).git_version == "v1.36.0"
    finally:
        thread.join(TIMEOUT)
        httpd.server_close()
    subject = dict(item[0] for item in _VersionHandler.clients[0]["subject"])
    assert subject == {"organizationName": "system:masters", "commonName": "numa-lab-admin"}
