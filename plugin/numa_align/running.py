"""The plugin's main loop: serve every node, register with the kubelet, follow its restarts.

One thread runs `Plugin.run()`; it sleeps in the directory watch and wakes on a change in the kubelet's
socket directory, on a due retry or rescan, or on `stop()`. Everything that touches servers and
registrations happens on that thread, so they need no lock of their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from numa_align.devices import device_count
from numa_align.metrics import Metrics
from numa_align.registration import KUBELET_SOCKET, RegistrationError, register
from numa_align.servicer import NodeDevicePlugin
from numa_align.serving import Endpoint, file_identity
from numa_align.settings import Settings
from numa_align.sysfs import NodeInfo, SysfsError, read_mounted_nodes
from numa_align.watching import DirectoryWatch

log = logging.getLogger(__name__)

RETRY_FIRST = 0.2
RETRY_MAX = 5.0
"""Seconds between attempts to register with a kubelet that does not answer (doubling up to the max)."""
REGISTER_TIMEOUT = 1.0
DIR_GONE_POLL = 0.5
"""Seconds between looks for a socket directory that was removed (inotify cannot watch what is not there)."""


class Plugin:
    """Serves `numa-align/numa-N` for every NUMA node until `stop()`; see `run()`."""

    def __init__(self, settings: Settings, nodes: Iterable[NodeInfo], metrics: Metrics | None = None) -> None:
        if settings.socket_dir is None:
            raise ValueError("Settings.socket_dir is required to serve")
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.socket_dir: Path = settings.socket_dir
        self.kubelet_socket = self.socket_dir / KUBELET_SOCKET
        self.ready = threading.Event()
        """Set once every node's server accepts connections (registration may still be waiting)."""
        self.metrics_address: tuple[str, int] | None = None
        self._initial = list(nodes)
        self._stopping = threading.Event()
        self._watch: DirectoryWatch | None = None
        self._endpoints: dict[int, Endpoint] = {}
        self._last_seen: dict[int, NodeInfo] = {}
        self._pending: set[int] = set()

    @property
    def endpoints(self) -> dict[int, Endpoint]:
        return dict(self._endpoints)

    def stop(self, reason: str = "stop requested") -> None:
        """Ask run() to end the streams, remove its sockets and return. Safe from signal handlers."""
        if not self._stopping.is_set():
            log.info("stopping: %s", reason)
        self._stopping.set()
        if self._watch is not None:
            self._watch.wake()

    def run(self) -> None:
        """Serve until stop(). Raises OSError if a socket or the metrics port cannot be bound."""
        self._watch = watch = DirectoryWatch(self.socket_dir)
        try:
            if self.settings.metrics_addr is not None:
                self.metrics_address = self.metrics.serve(*self.settings.metrics_addr)
            self._apply(self._initial)
            self.ready.set()
            self._loop(watch)
        finally:
            self._shutdown()

    # -- the loop ----------------------------------------------------------------------------------

    def _loop(self, watch: DirectoryWatch) -> None:
        kubelet = file_identity(self.kubelet_socket)
        if kubelet is None:
            log.info("waiting for the kubelet: %s does not exist yet", self.kubelet_socket)
        retry_at, backoff = 0.0, RETRY_FIRST
        next_rescan = time.monotonic() + self.settings.rescan_interval
        while not self._stopping.is_set():
            now = time.monotonic()
            deadline = next_rescan
            if self._pending and kubelet is not None:
                deadline = min(deadline, retry_at)
            timeout = max(0.0, deadline - now)
            if not watch.watching:
                timeout = min(timeout, DIR_GONE_POLL)
            events = watch.wait(timeout)
            if events:
                log.debug("in %s: %s", self.socket_dir, ", ".join(map(str, events)))
            if self._stopping.is_set():
                return
            if not watch.watching:
                if not watch.rewatch():
                    continue  # the directory is gone: nothing to bind or register until it is back
                log.info("%s is back; watching it again", self.socket_dir)

            # kubelet.sock first: a kubelet creates it after deleting the old sockets, so once it is seen
            # the check of our own sockets below cannot miss a deletion still to come.
            created = any(event.created and event.name == KUBELET_SOCKET for event in events)
            current = file_identity(self.kubelet_socket)
            if created or current != kubelet:
                kubelet = current
                for node in self._endpoints:
                    self._unregistered(node)
                if current is None:
                    log.warning("%s is gone; waiting for the kubelet to come back", self.kubelet_socket)
                else:
                    log.info("%s (re)created; registering %d resources", self.kubelet_socket, len(self._pending))
                    retry_at, backoff = 0.0, RETRY_FIRST

            for endpoint in self._endpoints.values():
                if endpoint.socket_lost():
                    log.info("%s: socket %s was removed; serving on a new one", endpoint.resource, endpoint.path)
                    endpoint.start()
                    self._unregistered(endpoint.servicer.node)

            if self._pending and kubelet is not None and time.monotonic() >= retry_at:
                if self._register():
                    backoff = RETRY_FIRST
                else:
                    retry_at, backoff = time.monotonic() + backoff, min(backoff * 2, RETRY_MAX)

            if time.monotonic() >= next_rescan:
                self._rescan()
                next_rescan = time.monotonic() + self.settings.rescan_interval

    def _register(self) -> bool:
        """Register every pending resource; True when none is left pending."""
        pending = sorted(self._pending)
        try:
            done = register(
                self.kubelet_socket,
                [(self._endpoints[n].resource, self._endpoints[n].endpoint) for n in pending],
                timeout=REGISTER_TIMEOUT,
            )
        except RegistrationError as exc:
            log.warning("registration failed, will retry: %s", exc)
            return False
        for node in pending:
            resource = self._endpoints[node].resource
            if resource in done:
                self._pending.discard(node)
                self.metrics.set_registered(resource, True)
                self.metrics.registrations.inc()
        return not self._pending

    def _unregistered(self, node: int) -> None:
        self._pending.add(node)
        self.metrics.set_registered(self._endpoints[node].resource, False)

    # -- topology ----------------------------------------------------------------------------------

    def _rescan(self) -> None:
        try:
            nodes = read_mounted_nodes(self.settings.sysfs_root)
        except SysfsError as exc:
            log.warning("sysfs rescan failed, keeping the last topology: %s", exc)
            return
        self._apply(nodes)

    def _apply(self, nodes: Iterable[NodeInfo]) -> None:
        """Advertise the online nodes healthy, the vanished ones unhealthy; serve nodes seen first now."""
        online = {node.id: node for node in nodes}
        for node_id, node in sorted(online.items()):
            self._last_seen[node_id] = node
            self.metrics.set_node(node_id, len(node.cpus), node.memory)
            count = device_count(node.cpus, self.settings.capacity, self.settings.reserved_cpus)
            if node_id not in self._endpoints:
                servicer = NodeDevicePlugin(node_id, self.metrics)
                servicer.set_devices(count, healthy=True)
                endpoint = Endpoint(servicer, self.socket_dir)
                self._endpoints[node_id] = endpoint
                endpoint.start()
                self._unregistered(node_id)
            else:
                self._endpoints[node_id].servicer.set_devices(count, healthy=True)
        for node_id, endpoint in self._endpoints.items():
            if node_id not in online:
                servicer = endpoint.servicer
                if servicer.set_devices(len(servicer.devices), healthy=False):
                    log.warning("NUMA node %d is no longer online", node_id)

    def _shutdown(self) -> None:
        for endpoint in self._endpoints.values():
            endpoint.stop(grace=1.0)
            self.metrics.set_registered(endpoint.resource, False)
        if self._endpoints:
            log.info("stopped %d servers and removed their sockets", len(self._endpoints))
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.metrics.close()
