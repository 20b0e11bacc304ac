"""The plugin's main loop: serve every node, register with the kubelet, follow its restarts.

One thread runs `Plugin.run()`; it sleeps in the directory watch and wakes on a change in the kubelet's
socket directory, on a due retry or rescan, or on `stop()`. Everything that touches servers and
registrations happens on that thread, so they need no lock of their own.

Two things are retried with backoff: registration (the kubelet may not answer yet) and binding a socket
(the directory may be removed between the look and the bind, as a kubelet reinstall does). A failed bind
is tried again when its delay is over or at once when the directory is back; never while it is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from numa_align.backoff import Backoff
from numa_align.devices import device_count
from numa_align.discovery import advertised
from numa_align.metrics import Metrics
from numa_align.registration import KUBELET_SOCKET, RegistrationError, register
from numa_align.servicer import NodeDevicePlugin
from numa_align.serving import BindError, Endpoint, file_identity, stop_endpoints
from numa_align.settings import Settings
from numa_align.sysfs import HostTopology, NodeInfo, SysfsError, read_sysfs
from numa_align.watching import DirectoryWatch

log = logging.getLogger(__name__)

RETRY_FIRST = 0.2
RETRY_MAX = 5.0
"""Seconds between attempts to register with a kubelet that does not answer (doubling up to the max)."""
BIND_RETRY_FIRST = 0.1
BIND_RETRY_MAX = 5.0
"""Seconds between attempts to bind a socket that failed to bind (doubling up to the max)."""
REGISTER_TIMEOUT = 1.0
DIR_GONE_POLL = 0.5
"""Seconds between looks for a socket directory that was removed (inotify cannot watch what is not there)."""


class Plugin:
    """Serves `numa-align/numa-N` for every NUMA node until `stop()`; see `run()`."""

    def __init__(self, settings: Settings, host: HostTopology, metrics: Metrics | None = None) -> None:
        if settings.socket_dir is None:
            raise ValueError("Settings.socket_dir is required to serve")
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.socket_dir: Path = settings.socket_dir
        self.kubelet_socket = self.socket_dir / KUBELET_SOCKET
        self.ready = threading.Event()
        """Set once every node's server accepts connections (registration may still be waiting)."""
        self.metrics_address: tuple[str, int] | None = None
        self.topology = host
        """The host as the latest sysfs scan saw it (read by the NRT publisher's thread)."""
        self._initial = host
        self._stopping = threading.Event()
        self._watch: DirectoryWatch | None = None
        self._endpoints: dict[int, Endpoint] = {}
        self._last_seen: dict[int, NodeInfo] = {}
        self._pending: set[int] = set()
        self._unbound: dict[int, Backoff] = {}
        """Nodes whose socket failed to bind, with when to try again."""

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
        """Serve until stop(). Raises OSError if a socket or the metrics port cannot be bound at start;
        a socket that fails to bind later is retried (see the module docstring)."""
        self._watch = watch = DirectoryWatch(self.socket_dir)
        try:
            if self.settings.metrics_addr is not None:
                self.metrics_address = self.metrics.serve(*self.settings.metrics_addr)
            self._apply(self._initial, retry_binds=False)
            self.ready.set()
            self._loop(watch)
        finally:
            self._shutdown()

    # -- the loop ----------------------------------------------------------------------------------

    def _loop(self, watch: DirectoryWatch) -> None:
        kubelet = file_identity(self.kubelet_socket)
        if kubelet is None:
            log.info("waiting for the kubelet: %s does not exist yet", self.kubelet_socket)
        registration = Backoff(RETRY_FIRST, RETRY_MAX)
        next_rescan = time.monotonic() + self.settings.rescan_interval
        while not self._stopping.is_set():
            deadline = next_rescan
            if self._registrable() and kubelet is not None:
                deadline = min(deadline, registration.due)
            if self._unbound and watch.watching:
                deadline = min(deadline, *(backoff.due for backoff in self._unbound.values()))
            timeout = max(0.0, deadline - time.monotonic())
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
                for backoff in self._unbound.values():
                    backoff.reset()  # bind at once

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
                    registration.reset()

            for node, endpoint in self._endpoints.items():
                if endpoint.socket_lost():
                    log.info("%s: socket %s was removed; serving on a new one", endpoint.resource, endpoint.path)
                    self._serve(endpoint)
                elif node in self._unbound and self._unbound[node].is_due():
                    self._serve(endpoint)

            if self._registrable() and kubelet is not None and registration.is_due():
                if self._register():
                    registration.reset()
                else:
                    registration.failed()

            if time.monotonic() >= next_rescan:
                self._rescan()
                next_rescan = time.monotonic() + self.settings.rescan_interval

    def _registrable(self) -> list[int]:
        """Pending nodes whose socket is bound and still there: the kubelet would dial the others in vain."""
        return sorted(n for n in self._pending - self._unbound.keys() if not self._endpoints[n].socket_lost())

    def _register(self) -> bool:
        """Register every registrable resource; True when none is left to register."""
        pending = self._registrable()
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
        return not self._registrable()

    def _unregistered(self, node: int) -> None:
        self._pending.add(node)
        self.metrics.set_registered(self._endpoints[node].resource, False)

    def _serve(self, endpoint: Endpoint, retry: bool = True) -> None:
        """(Re)start an endpoint's server; on BindError, try again later with backoff (or raise, at start)."""
        node = endpoint.servicer.node
        self._unregistered(node)
        try:
            endpoint.start()
        except BindError as exc:
            if not retry:
                raise
            backoff = self._unbound.setdefault(node, Backoff(BIND_RETRY_FIRST, BIND_RETRY_MAX))
            delay = backoff.failed()
            log.warning("%s; bind attempt %d failed, next in %.1fs (or when the directory is back)",
                        exc, backoff.failures, delay)
            return
        failed = self._unbound.pop(node, None)
        if failed is not None:
            log.info("%s: serving on %s after %d failed binds", endpoint.resource, endpoint.path, failed.failures)

    # -- topology ----------------------------------------------------------------------------------

    def _rescan(self) -> None:
        try:
            host = read_sysfs(self.settings.sysfs_root)
        except SysfsError as exc:
            log.warning("sysfs rescan failed, keeping the last topology: %s", exc)
            return
        self._apply(host)

    def _apply(self, host: HostTopology, retry_binds: bool = True) -> None:
        """Advertise the online nodes that have online CPUs healthy; those gone offline or left without CPUs
        unhealthy; serve nodes seen first now. Memory-only nodes show in the metrics, never as devices."""
        self.topology = host
        for node in host.nodes:
            self.metrics.set_node(node.id, len(node.cpus), node.memory, memory_only=not advertised(node))
        online = {node.id: node for node in host.nodes if advertised(node)}
        for node_id, node in sorted(online.items()):
            self._last_seen[node_id] = node
            count = device_count(node.cpus, self.settings.capacity, self.settings.reserved_cpus)
            if node_id not in self._endpoints:
                servicer = NodeDevicePlugin(node_id, self.metrics)
                servicer.set_devices(count, healthy=True)
                endpoint = Endpoint(servicer, self.socket_dir)
                self._endpoints[node_id] = endpoint
                self._serve(endpoint, retry=retry_binds)
            else:
                self._endpoints[node_id].servicer.set_devices(count, healthy=True)
        for node_id, endpoint in self._endpoints.items():
            if node_id not in online:
                servicer = endpoint.servicer
                if servicer.set_devices(len(servicer.devices), healthy=False):
                    log.warning("NUMA node %d is no longer online or has no online CPU", node_id)

    def _shutdown(self) -> None:
        stop_endpoints(self._endpoints.values(), grace=1.0)
        for endpoint in self._endpoints.values():
            self.metrics.set_registered(endpoint.resource, False)
        if self._endpoints:
            log.info("stopped %d servers and removed their sockets", len(self._endpoints))
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.metrics.close()
