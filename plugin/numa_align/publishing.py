"""This node's NodeResourceTopology (NRT) object kept current in the API server, and the per-node gauges.

One thread polls the kubelet's PodResources API (List and GetAllocatableResources) every `poll` seconds, and at once
when the kubelet rewrites its CPU or Memory Manager checkpoint (checkpoint_watch.py: an admission), turns the answer
into the NRT object (`nrt.build_nrt`) and the per-node gauges, and has `NrtWriter` write the object when its content
changed (nrt_writer.py: no periodic rewrite; a quiet object is read once a minute and repaired if it was deleted or
edited). After each poll that found the object current it renews the node's Lease (leases.py), which is how a
stopped numa-align shows, and posts the Events of the kubelet guard's moves at this boot not posted yet
(guard_events.py; the guard's record is looked at every poll, a stat, and its moves set a gauge too). Each poll also
audits the pinned containers' real cpusets (auditing.py: gauges, and the object's `numa-align/audit` annotation,
which makes it dirty when it changes). The poll runs when NRT publishing is on or metrics are served (without a
client it only sets the gauges): one poll serves both, and the gauges should not need an API server.

The pod fingerprint covers every pod the kubelet's PodResources List returns (admitted, not terminated; a pod
stuck Pending in ImagePullBackOff included): exactly the pods whose resources the object accounts for. numa-lab's
scheduler counts every pod bound to the node and not finished, so a pod bound but not yet admitted keeps the node
out of its resync (which would drop the pod's reservation) until the object shows it. No pod list is needed.

Nothing leaves the thread: each kind of failure (PodResources socket absent, CRD missing, Node not found,
API server unreachable, forbidden, ...) is logged once as a warning and recovered from, and the recovery is
logged once too. After an API failure the API calls wait with exponential backoff and jitter (from the poll
interval up to a minute, backoff.py) while PodResources is still read every poll for the gauges; a success
resets it. `status` says how the latest poll ended.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from numa_align.allocations import allocations_annotation
from numa_align.auditing import Auditor
from numa_align.backoff import Backoff
from numa_align.checkpoint_watch import CheckpointWatch, kubelet_dir
from numa_align.fingerprint import METHOD_ALL, pod_fingerprint
from numa_align.guard_events import GuardEvents
from numa_align.guard_report import GuardRecord
from numa_align.kubeapi import ApiError, CrdMissing, KubeApiError, KubeClient, Unreachable
from numa_align.kubeconfig import ConfigError
from numa_align.kubelet_sources import InspectError, PodResources, PodResourcesReader
from numa_align.leases import NodeLease
from numa_align.metrics import Metrics
from numa_align.nrt import allocatable_from_podresources, build_nrt, exclusive_from_podresources, pinned_pods
from numa_align.nrt_writer import CHECK_EVERY, MIN_INTERVAL, NodeNotFound, NrtWriter
from numa_align.settings import OPTIONS, Settings
from numa_align.sysfs import HostTopology

log = logging.getLogger(__name__)

BACKOFF_MOST = 60.0
"""Seconds between API attempts at most during an outage."""
KUBELET_KINDS = ("pod-resources socket", "pod-resources", "pod-resources mismatch")
API_KINDS = ("CRD missing", "node not found", "unreachable", "unauthorized", "forbidden", "credentials",
             "API error")

__all__ = ["NodeNotFound", "NrtPublisher"]


class NrtPublisher:
    """Polls PodResources and publishes the NRT object (with a client) and the per-node gauges (with metrics).

    `topology` returns the host's current topology (the plugin's latest sysfs scan); `guard_record`: the
    kubelet guard's record, whose moves of this boot are gauges (with metrics) and Events (with a client).
    `clock`, `wall` (for the Lease's and Events' times), `jitter` and `query` are injectable for tests, which
    call `poll_once()` themselves.
    """

    def __init__(self, settings: Settings, topology: Callable[[], HostTopology], client: KubeClient | None = None,
                 metrics: Metrics | None = None, *, clock: Callable[[], float] = time.monotonic,
                 min_interval: float = MIN_INTERVAL, check_every: float = CHECK_EVERY,
                 jitter: Callable[[], float] = random.random, wall: Callable[[], Any] | None = None,
                 query: Callable[[Path], PodResources] | None = None, guard_record: GuardRecord | None = None) -> None:
        if client is not None and not settings.node_name:
            raise ValueError("publishing the NRT object needs settings.node_name")
        self.settings = settings
        self.client = client
        self.metrics = metrics
        self.poll = settings.poll_interval
        self.status = "not polled yet"
        self.backoff = Backoff(self.poll, BACKOFF_MOST, jitter=jitter, clock=clock)
        """API calls wait while it is not due; PodResources is read every poll regardless."""
        self.writer: NrtWriter | None = None
        self.lease: NodeLease | None = None
        self.guard_events: GuardEvents | None = None
        lookup = None
        if client is not None and settings.node_name:
            node = settings.node_name
            self.writer = NrtWriter(client, node, clock=clock, min_interval=min_interval, check_every=check_every)
            lease_times = {} if wall is None else {"wall": wall}
            self.lease = NodeLease(client, node, f"numa-align@{node}", clock=clock, **lease_times)
            lookup = partial(client.running_pod_objects, node)
            if guard_record is not None:
                self.guard_events = GuardEvents(client, node, **lease_times)
        self.guard_record = guard_record
        self.auditor = Auditor(settings.cgroup_tree, lookup, self.poll, may_ask=self.backoff.is_due, clock=clock)
        self._audit_shown: dict[str, str] | None = None
        self._topology = topology
        self._clock = clock
        self._query = query or PodResourcesReader()
        self._problems: dict[str, str] = {}
        self._lease_refused = False
        self._dirty = True
        """The object may differ from the one written: build it and compare at the next API turn."""
        self._last_answer: tuple[Any, ...] | None = None
        self._derived: tuple[Any, Any] | None = None
        """(allocatable, exclusive) of the latest answer."""
        self._wake = CheckpointWatch(kubelet_dir(settings.pod_resources_socket), clock=clock,
                                     observe=None if metrics is None else metrics.nrt_update_latency.observe)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def last_published(self) -> dict[str, Any] | None:
        return None if self.writer is None else self.writer.last_published

    @property
    def writes(self) -> int:
        return 0 if self.writer is None else self.writer.writes

    # -- the thread --------------------------------------------------------------------------------

    def start(self) -> None:
        self._wake.open()  # before the first poll, so that an admission during it is not missed
        self._thread = threading.Thread(target=self._run, name="nrt-publisher", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Poll now instead of at the next interval (the kubelet's state changed)."""
        self._wake.wake()

    def stop(self, timeout: float = 2.0) -> None:
        """End the thread; a request under way is not waited for longer than `timeout` (the thread is a daemon)."""
        self._stopping.set()
        self._wake.wake()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            writes = self._wake.polling(self.writes)
            self.poll_once()
            self._wake.polled(self.writes > writes, waiting=self._dirty or bool(self.writer and self.writer.pending))
            self._wake.wait(self._next_wait())
        self._wake.close()

    def _next_wait(self) -> float:
        """The poll interval, shorter when a change waits for a write to be allowed."""
        writer = self.writer
        if writer is not None and writer.pending:
            return min(self.poll, writer.next_write_in(self._clock()))
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
            self._dirty = True
            return
        self._recovered(("unexpected",), "the PodResources poll")

    def _poll(self) -> None:
        moved = None if self.guard_record is None else self.guard_record.changed()
        if moved is not None:
            if self.metrics is not None:
                self.metrics.set_checkpoints_set_aside(entry.file for entry in moved)
            if self.guard_events is not None:
                self.guard_events.offer(moved)
        topology = self._topology()
        socket = self.settings.pod_resources_socket
        try:
            answer = self._query(socket)
            fresh = self._fresh(answer, topology)
            if fresh or self._derived is None:
                self._derived = (allocatable_from_podresources(answer.allocatable, topology),
                                 exclusive_from_podresources(answer.listed, topology))
        except InspectError as exc:
            kind = "pod-resources" if socket.exists() else "pod-resources socket"
            return self._trouble(kind, f"cannot read the kubelet's PodResources ({exc}; "
                                       f"{OPTIONS['pod_resources_socket'].variable} names the socket)")
        except ValueError as exc:
            self._last_answer = self._derived = None
            return self._trouble("pod-resources mismatch", f"the kubelet's PodResources do not match sysfs: {exc}")
        self._recovered(KUBELET_KINDS, f"reading PodResources at {socket}")
        if fresh and self.metrics is not None:
            self.metrics.set_cells(*self._derived, pinned_pods(answer.listed, topology))
        audit = self.auditor.run(answer.listed, topology, *self._derived)
        if self.metrics is not None:
            self.metrics.set_audit(audit)
        if self.writer is None:
            self.status = "gauges set"
            return
        self._dirty = self._dirty or fresh or audit.annotation() != self._audit_shown
        if not self.backoff.is_due():
            self.status = (f"API calls paused for {self.backoff.remaining():.1f}s more after "
                           f"{self.backoff.failures} failures")
            return
        try:
            self._keep_current(answer, topology)
            self._renew_lease()
        except (KubeApiError, ConfigError) as exc:
            self._dirty = True  # whatever was under way is done again, in full, at the next attempt
            delay = self.backoff.failed()
            return self._trouble(*self._describe(exc), retry=delay)
        if self.backoff.failures:
            log.info("the API server answers again after %d failures", self.backoff.failures)
        self.backoff.reset()
        self._recovered(API_KINDS, f"publishing NodeResourceTopology {self.settings.node_name}")
        if self.guard_events is not None and self.guard_events.pending:
            self.guard_events.post(self.writer.uid)

    def _fresh(self, answer: PodResources, topology: HostTopology) -> bool:
        """The kubelet did not answer exactly as last time on the same topology. Building the object costs
        far more than asking (seconds of CPU a minute on an emulated node), so an idle node only asks."""
        key = (answer.listed.SerializeToString(deterministic=True),
               None if answer.allocatable is None else answer.allocatable.SerializeToString(deterministic=True),
               topology)
        fresh, self._last_answer = key != self._last_answer, key
        return fresh

    def _keep_current(self, answer: PodResources, topology: HostTopology) -> None:
        """Build and write the object when something it shows may have changed; else check it now and then."""
        assert self.writer is not None
        writer = self.writer
        stale = writer.check_due() and writer.check()  # deleted or edited by someone else
        if not (stale or self._dirty or writer.pending):  # a changed pod set made the answer fresh, so dirty
            self.status = "unchanged"
            return
        kubelet = frozenset((pod.namespace, pod.name) for pod in answer.listed.pod_resources)
        fingerprint = pod_fingerprint(sorted(kubelet))  # every pod the object accounts for (module docstring)
        assert self._derived is not None
        allocatable, exclusive = self._derived
        self._audit_shown = audit = self.auditor.latest.annotation() if self.auditor.latest else {}
        annotations = {**allocations_annotation(answer.listed, topology), **audit}  # for people: who holds what
        settings = self.settings

        def build(uid: str) -> dict[str, Any]:
            return build_nrt(settings.node_name or "", uid, topology, allocatable, exclusive, settings.topology_policy,
                             settings.topology_scope, fingerprint, METHOD_ALL, annotations)

        self.status = writer.publish(build)
        self._dirty = False

    def _renew_lease(self) -> None:
        """Renew the Lease when due; without the right to, say so once and go on publishing."""
        assert self.lease is not None and self.writer is not None
        try:
            renewed = self.lease.renew_if_due(self.writer.uid)
        except ApiError as exc:
            if exc.status != 403:
                raise
            if not self._lease_refused:
                log.warning("numa-align's Lease is not renewed, so a stopped numa-align will not show as stale; "
                            "the NodeResourceTopology object is still published: %s", exc)
            self._lease_refused = True
            return
        if renewed and self._lease_refused:
            log.info("numa-align's Lease is renewed again")
            self._lease_refused = False

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

    def _trouble(self, kind: str, message: str, retry: float | None = None) -> None:
        if kind not in self._problems:
            when = (f"trying again every {self.poll:g}s" if retry is None else
                    f"trying the API server again in {retry:.1f}s, backing off up to {self.backoff.most:g}s")
            log.warning("%s; %s", message, when)
        else:
            log.debug("%s", message)
        self._problems[kind] = self.status = message

    def _recovered(self, kinds: tuple[str, ...], what: str) -> None:
        gone = [kind for kind in kinds if self._problems.pop(kind, None) is not None]
        if gone:
            log.info("%s works again (after: %s)", what, ", ".join(gone))
