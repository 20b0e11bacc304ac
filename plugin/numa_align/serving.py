"""One resource's gRPC server on its own unix socket, `numa-N.sock` in the kubelet's directory.

The kubelet's ListAndWatch names no resource, so each resource needs a socket of its own. A stopped gRPC
server cannot be started again: after its socket is lost the plugin builds a new Endpoint server. A bind
can fail for a moment, when the kubelet's directory is removed and recreated (reinstall, upgrade) between
the plugin's look and its bind: `start` then raises BindError and the caller tries again later.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc
from numa_align.devices import socket_name
from numa_align.servicer import NodeDevicePlugin

log = logging.getLogger(__name__)

WORKERS = 4
"""Threads per server: the kubelet holds one ListAndWatch stream and makes unary calls one at a time."""


class BindError(OSError):
    """The socket could not be bound (its directory may be gone for a moment): try again later."""


class Endpoint:
    """Serves one NodeDevicePlugin on `<socket_dir>/numa-N.sock`; remembers the socket file it made so it
    notices when the kubelet deletes it, and never removes a file it did not make."""

    def __init__(self, servicer: NodeDevicePlugin, socket_dir: Path) -> None:
        self.servicer = servicer
        self.path = socket_dir / socket_name(servicer.node)
        self._server: grpc.Server | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._identity: tuple[int, int] | None = None

    @property
    def resource(self) -> str:
        return self.servicer.resource

    @property
    def endpoint(self) -> str:
        """What the plugin registers: the socket's file name, relative to the kubelet's directory."""
        return self.path.name

    @property
    def serving(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Build a new server, bind the socket and serve; returns once connections are accepted.

        Raises BindError, leaving no server running, when the socket cannot be bound.
        """
        self.stop()
        self._remove_stale()
        executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=f"numa-{self.servicer.node}")
        server = grpc.server(executor, options=[("grpc.max_concurrent_streams", 16)])
        api_grpc.add_DevicePluginServicer_to_server(self.servicer, server)
        try:
            self._listen(server)
        except BindError:
            executor.shutdown(wait=False)
            raise
        self._server, self._executor = server, executor
        # None when the file went at once (a starting kubelet cleans the directory): socket_lost() says so.
        self._identity = file_identity(self.path)
        log.debug("%s: serving on %s", self.resource, self.path)

    def _listen(self, server: grpc.Server) -> None:
        """Bind the socket and start serving on it (a seam: tests act between this and the stat after it)."""
        try:
            bound = server.add_insecure_port(f"unix:{self.path}")
        except RuntimeError:  # grpcio raises where older versions returned 0; its log line says why
            bound = 0
        if not bound:
            raise BindError(f"{self.resource}: cannot bind {self.path}{self._why_not()}")
        server.start()

    def stop(self, grace: float = 0.5) -> None:
        """End the streams cleanly, stop the server, and remove the socket if it is still ours."""
        stop_endpoints([self], grace)

    def begin_stop(self, grace: float) -> threading.Event | None:
        """End the streams and start the server's stop; the event is set once it has stopped."""
        if self._server is None:
            return None
        self.servicer.end_streams()
        return self._server.stop(grace)

    def finish_stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        if self._identity is not None and file_identity(self.path) == self._identity:
            self.path.unlink(missing_ok=True)
        self._server = self._executor = self._identity = None

    def _remove_stale(self) -> None:
        if not (self.path.exists() or self.path.is_symlink()):
            return
        log.info("%s: removing stale %s", self.resource, self.path)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass  # the kubelet removed it first
        except OSError as exc:
            raise BindError(f"{self.resource}: cannot remove stale {self.path}: {exc.strerror}") from None

    def _why_not(self) -> str:
        if not self.path.parent.is_dir():
            return f": {self.path.parent} does not exist (the kubelet recreates it)"
        return " (see gRPC's 'Failed to add port' line above)"

    def socket_lost(self) -> bool:
        """True when the server runs but its socket file was deleted or replaced (kubelet restart), even
        before the plugin could look at it."""
        return self._server is not None and (self._identity is None or file_identity(self.path) != self._identity)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(inode, ctime ns) of a file: a deleted-and-recreated file differs even if the inode is reused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


def stop_endpoints(endpoints: Iterable[Endpoint], grace: float) -> None:
    """Stop several servers within one grace period, not one after another: systemd and the kubelet give a
    stopping plugin a deadline, and each server's stop takes up to `grace` (longer on an emulated host)."""
    stopping = [(endpoint, endpoint.begin_stop(grace)) for endpoint in endpoints]
    for endpoint, stopped in stopping:
        if stopped is not None:
            stopped.wait()
            endpoint.finish_stop()
