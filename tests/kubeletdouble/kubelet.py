"""KubeletDouble: kubelet.sock with Registration, a device manager, and kubelet-like restarts."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from numa_align.api import deviceplugin_v1beta1_pb2 as api
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc

from tests.kubeletdouble.devicemanager import PluginClient
from tests.kubeletdouble.registration import RegistrationServicer

KUBELET_SOCKET = "kubelet.sock"
CHECKPOINT = "kubelet_internal_checkpoint"
"""The device manager's checkpoint file: the one thing a kubelet keeps in the directory at start."""


class KubeletDouble:
    """Serves Registration on `<socket_dir>/kubelet.sock` and connects to every plugin that registers.

    `registrations` lists (generation, RegisterRequest) in arrival order; `client(resource)` is the
    current connection to a resource once it is connected (options read, ListAndWatch open).
    """

    def __init__(self, socket_dir: Path) -> None:
        self.socket_dir = socket_dir
        self.generation = -1
        self.registrations: list[tuple[int, api.RegisterRequest]] = []
        self.errors: list[str] = []
        self.started_at = 0.0
        """time.monotonic() just before the current kubelet.sock was bound."""
        self.registered_at: dict[tuple[int, str], float] = {}
        """(generation, resource) -> time.monotonic() when its Register arrived."""
        self._clients: dict[str, PluginClient] = {}
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None

    @property
    def socket(self) -> Path:
        return self.socket_dir / KUBELET_SOCKET

    def start(self) -> None:
        """Start like a kubelet: clean the directory (all but the checkpoint), then serve kubelet.sock."""
        for entry in self.socket_dir.iterdir():
            if entry.name != CHECKPOINT:
                entry.unlink()
        with self._cond:
            self.generation += 1
        (self.socket_dir / CHECKPOINT).write_text(json.dumps({"Data": {"generation": self.generation}}))
        server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix="kubelet"))
        api_grpc.add_RegistrationServicer_to_server(RegistrationServicer(self._on_register), server)
        self.started_at = time.monotonic()
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop serving and drop every plugin connection, like a dying kubelet (its socket stays)."""
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        with self._cond:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self, resource: str) -> PluginClient | None:
        with self._cond:
            return self._clients.get(resource)

    def wait_connected(self, resources: list[str], generation: int | None = None, timeout: float = 10.0) -> bool:
        """Wait until every resource is connected in `generation` (default: the current run)."""
        def connected() -> bool:
            wanted = self.generation if generation is None else generation
            return all(
                (c := self._clients.get(r)) is not None and c.generation == wanted and c.updates for r in resources
            )

        with self._cond:
            return self._cond.wait_for(connected, timeout=timeout)

    def wait_new_client(self, resource: str, old: PluginClient, timeout: float = 10.0) -> PluginClient | None:
        """Wait until `resource` is connected through a client other than `old` (it registered again)."""
        with self._cond:
            self._cond.wait_for(lambda: self._clients.get(resource) not in (None, old), timeout=timeout)
            client = self._clients.get(resource)
        return None if client is old else client

    def _on_register(self, request: api.RegisterRequest) -> None:
        with self._cond:
            generation = self.generation
            self.registrations.append((generation, request))
            self.registered_at[(generation, request.resource_name)] = time.monotonic()
        threading.Thread(
            target=self._connect, args=(request, generation), name=f"dial-{request.resource_name}", daemon=True
        ).start()

    def _connect(self, request: api.RegisterRequest, generation: int) -> None:
        client = PluginClient(request.resource_name, self.socket_dir / request.endpoint, generation)
        try:
            client.connect()
        except grpc.RpcError as exc:
            with self._cond:
                self.errors.append(f"{request.resource_name}: {exc.code().name}: {exc.details()}")
            client.close()
            return
        if not client.wait_for(lambda c: bool(c.updates) or c.stream_status is not None, timeout=10):
            with self._cond:
                self.errors.append(f"{request.resource_name}: no device list from {client.socket}")
            client.close()
            return
        with self._cond:
            stale = self.generation != generation
            old = None if stale else self._clients.get(request.resource_name)
            if not stale:
                self._clients[request.resource_name] = client
            self._cond.notify_all()
        if stale:
            client.close()
        if old is not None:
            old.close()
