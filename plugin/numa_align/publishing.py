"""This node's NodeResourceTopology (NRT) object kept current in the API server, and the per-node gauges.

One thread polls the kubelet's PodResources API every `poll` seconds (List and GetAllocatableResources),
turns the answer into the NRT object (`nrt.build_nrt`) and the per-node gauges, and writes the object when
its content (zones, attributes, owner) changed, at most once per `min_interval`, and every `refresh`
seconds regardless, so an object edited or deleted by hand comes back. The poll runs when NRT publishing
is on or metrics are served (without a client it only sets the gauges): one poll serves both, and the
gauges should not need an API server.

The object is owned by the Node, so it goes when the Node goes; the Node's uid is read once, and again
whenever the object turns out to be absent (the Node may have been recreated with a new uid). The pod
fingerprint covers every pod the kubelet lists (method "all"): the other method can disagree with the
scheduler unless the CPU and Memory Managers are both static (see fingerprint.py).

Nothing leaves the thread: each kind of failure (PodResources socket absent, CRD missing, Node not found,
API server unreachable, forbidden, ...) is logged once as a warning and retried on the next poll, and the
recovery is logged once too. `status` says how the latest poll ended.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numa_align.allocations import allocations_annotation
from numa_align.fingerprint import METHOD_ALL, fingerprint_pods, pod_fingerprint
from numa_align.kubeapi import ApiError, CrdMissing, KubeApiError, KubeClient, NotFound, Unreachable
from numa_align.kubeconfig import ConfigError
from numa_align.kubelet_sources import InspectError, PodResources, PodResourcesReader
from numa_align.metrics import Metrics
from numa_align.nrt import allocatable_from_podresources, build_nrt, exclusive_from_podresources, pinned_pods
from numa_align.settings import OPTIONS, Settings
from numa_align.sysfs import HostTopology

log = logging.getLogger(__name__)

MIN_INTERVAL = 1.0
"""Seconds between two writes at least, however fast the pods change."""
REFRESH = 60.0
"""Seconds after which the object is written even if nothing changed."""
KUBELET_KINDS = ("pod-resources socket", "pod-resources", "pod-resources mismatch")
API_KINDS = ("CRD missing", "node not found", "unreachable", "unauthorized", "forbidden", "credentials",
             "API error")


class NodeNotFound(KubeApiError):
    """The node name is not a Node in the API server."""


class NrtPublisher:
    """Polls PodResources and publishes the NRT object (with a client) and the per-node gauges (with metrics).

    `topology` returns the host's current topology (the plugin's latest sysfs scan); `clock` and `query`
    are injectable for tests, which call `poll_once()` themselves.
    """

    def __init__(self, settings: Settings, topology: Callable[[], HostTopology], client: KubeClient | None = None,
                 metrics: Metrics | None = None, *, clock: Callable[[], float] = time.monotonic,
                 min_interval: float = MIN_INTERVAL, refresh: float = REFRESH,
                 query: Callable[[Path], PodResources] | None = None) -> None:
        if client is not None and not settings.node_name:
            raise ValueError("publishing the NRT object needs settings.node_name")
        self.settings = settings
        self.client = client
        self.metrics = metrics
        self.poll = settings.poll_interval
        self.min_interval = min_interval
        self.refresh = refresh
        self.last_published: dict[str, Any] | None = None
        """The object last written (without its resourceVersion)."""
        self.status = "not polled yet"
        self.writes = 0
        self._topology = topology
        self._clock = clock
        self._query = query or PodResourcesReader()
        self._problems: dict[str, str] = {}
        self._node_uid: str | None = None
        self._uid_fresh = False
        self._version: str | None = None
        self._written_at: float | None = None
        self._attempted_at: float | None = None
        self._pending = False
        self._last_answer: tuple[Any, ...] | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread --------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nrt-publisher", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Poll now instead of at the next interval (the kubelet's state changed)."""
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        """End the thread; a request under way is not waited for longer than `timeout` (the thread is a daemon)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self.poll_once()
            self._wake.wait(self._next_wait())

    def _next_wait(self) -> float:
        """The poll interval, shorter when a change waits for `min_interval` to pass."""
        if self._pending and self._attempted_at is not None:
            due = self._attempted_at + self.min_interval - self._clock()
            return max(0.0, min(self.poll, due))
        return self.poll

    # -- one poll ----------------------------------------------------------------------------------

    def poll_once(self) -> None:
        """Read PodResources, set the gauges, write the object if due. Never raises: failures are logged."""
        try:
            self._poll()
        except Exception as exc:  # a bug must not end the thread or the plugin: log it once, poll again
            if "unexpected" not in self._problems:
                log.exception("NRT poll failed unexpectedly; polling again every %gs", self.poll)
            self._problems["unexpected"] = self.status = f"unexpected {type(exc).__name__}: {exc}"
            return
        self._recovered(("unexpected",), "the PodResources poll")

    def _poll(self) -> None:
        topology = self._topology()
        socket = self.settings.pod_resources_socket
        try:
            answer = self._query(socket)
            if self._unchanged(answer, topology):
                return
            allocatable = allocatable_from_podresources(answer.allocatable, topology)
            exclusive = exclusive_from_podresources(answer.listed, topology)
        except InspectError as exc:
            kind = "pod-resources" if socket.exists() else "pod-resources socket"
            return self._trouble(kind, f"cannot read the kubelet's PodResources ({exc}; "
                                       f"{OPTIONS['pod_resources_socket'].variable} names the socket)")
        except ValueError as exc:
            return self._trouble("pod-resources mismatch", f"the kubelet's PodResources do not match sysfs: {exc}")
        self._recovered(KUBELET_KINDS, f"reading PodResources at {socket}")
        if self.metrics is not None:
            self.metrics.set_cells(allocatable, exclusive, pinned_pods(answer.listed, topology))
        if self.client is None:
            self.status = "gauges set"
            return
        fingerprint = pod_fingerprint(fingerprint_pods(answer.listed.pod_resources, METHOD_ALL))
        annotations = allocations_annotation(answer.listed, topology)  # which pods hold what, for people
        settings = self.settings

        def build(uid: str) -> dict[str, Any]:
            return build_nrt(settings.node_name or "", uid, topology, allocatable, exclusive, settings.topology_policy,
                             settings.topology_scope, fingerprint, METHOD_ALL, annotations)

        try:
            written = self._publish(build)
        except (KubeApiError, ConfigError) as exc:
            return self._trouble(*self._describe(exc))
        if written:  # not merely up to date or waiting: the API server took it
            self._recovered(API_KINDS, f"publishing NodeResourceTopology {settings.node_name}")

    def _unchanged(self, answer: PodResources, topology: HostTopology) -> bool:
        """Nothing to do this poll: the kubelet answered exactly as last time on the same topology, the last
        poll ended without trouble or a write waiting, and no refresh is due. Building the object costs far
        more than asking (seconds of CPU a minute on an emulated node), so an idle node only asks."""
        key = (answer.listed.SerializeToString(deterministic=True),
               None if answer.allocatable is None else answer.allocatable.SerializeToString(deterministic=True),
               topology)
        same, self._last_answer = key == self._last_answer, key
        refresh_due = self.client is not None and (
            self._written_at is None or self._clock() - self._written_at >= self.refresh)
        if same and not self._problems and not self._pending and not refresh_due:
            self.status = "unchanged"
            return True
        return False

    def _publish(self, build: Callable[[str], dict[str, Any]]) -> bool:
        """Write the object if due; True when it was written."""
        self._uid_fresh = False
        nrt = build(self._uid())
        now = self._clock()
        changed = self.last_published is None or _content(nrt) != _content(self.last_published)
        stale = self._written_at is None or now - self._written_at >= self.refresh
        if not changed and not stale:
            self._pending = False
            self.status = "up to date"
            return False
        if self._attempted_at is not None and now - self._attempted_at < self.min_interval:
            self._pending = True
            self.status = f"change waiting (at most one write per {self.min_interval:g}s)"
            return False
        self._attempted_at, self._pending = now, False
        written, nrt = self._write(nrt, build)
        self._version = written.get("metadata", {}).get("resourceVersion")
        first = self.last_published is None
        self.last_published, self._written_at = nrt, now
        self.writes += 1
        self.status = "published"
        (log.info if first else log.debug)("wrote NodeResourceTopology %s (%d zones; %s)", nrt["metadata"]["name"],
                                           len(nrt["zones"]), "changed" if changed else "refresh")
        return True

    def _write(self, nrt: dict[str, Any], build: Callable[[str], dict[str, Any]]) -> tuple[dict[str, Any], dict]:
        """Update the object (create it when absent); a conflict is read again and retried once."""
        assert self.client is not None
        name = nrt["metadata"]["name"]
        try:
            if self._version is None:
                self._version = _version(self.client.get_nrt(name))
            return self.client.update_nrt(_with_version(nrt, self._version)), nrt
        except NotFound:
            self._version = None
            return self._create(build)
        except ApiError as exc:
            if exc.status != 409:
                raise
        log.info("NodeResourceTopology %s changed since it was read; reading it again", name)
        self._version = _version(self.client.get_nrt(name))
        return self.client.update_nrt(_with_version(nrt, self._version)), nrt

    def _create(self, build: Callable[[str], dict[str, Any]]) -> tuple[dict[str, Any], dict]:
        """Absent: first start, deleted by hand, or collected with its Node, which may be new (a new uid)."""
        assert self.client is not None
        nrt = build(self._uid(again=True))
        try:
            return self.client.create_nrt(nrt), nrt
        except ApiError as exc:
            if exc.status != 409:
                raise
        self._version = _version(self.client.get_nrt(nrt["metadata"]["name"]))  # created meanwhile
        return self.client.update_nrt(_with_version(nrt, self._version)), nrt

    def _uid(self, again: bool = False) -> str:
        """The Node's uid: read once, and again when asked unless it was read in this poll already."""
        assert self.client is not None
        if self._node_uid is None or (again and not self._uid_fresh):
            name = self.settings.node_name
            try:
                node = self.client.get_node(name or "")
            except NotFound:
                self._node_uid = None
                raise NodeNotFound(
                    f"node {name!r} is not in the API server at {self.client.server}: a wrong or stale "
                    f"{OPTIONS['node_name'].variable} ({OPTIONS['node_name'].flag}), or the Node was deleted"
                ) from None
            self._node_uid, self._uid_fresh = node["metadata"]["uid"], True
        return self._node_uid

    # -- logging each kind of failure once ---------------------------------------------------------

    def _describe(self, exc: Exception) -> tuple[str, str]:
        kind = "API error"
        if isinstance(exc, CrdMissing):
            kind = "CRD missing"
        elif isinstance(exc, NodeNotFound):
            kind = "node not found"
        elif isinstance(exc, Unreachable):
            kind = "unreachable"
        elif isinstance(exc, ConfigError):
            kind = "credentials"
        elif isinstance(exc, ApiError) and exc.status in (401, 403):
            kind = "unauthorized" if exc.status == 401 else "forbidden"
        return kind, f"NodeResourceTopology {self.settings.node_name} not published: {exc}"

    def _trouble(self, kind: str, message: str) -> None:
        if kind not in self._problems:
            log.warning("%s; trying again every %gs", message, self.poll)
        else:
            log.debug("%s", message)
        self._problems[kind] = self.status = message

    def _recovered(self, kinds: tuple[str, ...], what: str) -> None:
        gone = [kind for kind in kinds if self._problems.pop(kind, None) is not None]
        if gone:
            log.info("%s works again (after: %s)", what, ", ".join(gone))


def _content(nrt: dict[str, Any]) -> tuple[Any, ...]:
    metadata = nrt["metadata"]
    return nrt["zones"], nrt["attributes"], metadata.get("ownerReferences"), metadata.get("annotations")


def _version(stored: dict[str, Any]) -> str | None:
    return stored.get("metadata", {}).get("resourceVersion")


def _with_version(nrt: dict[str, Any], version: str | None) -> dict[str, Any]:
    body = copy.deepcopy(nrt)
    if version is not None:
        body["metadata"]["resourceVersion"] = version
    return body
