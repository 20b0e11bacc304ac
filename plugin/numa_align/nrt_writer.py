"""This node's NodeResourceTopology object in the API server: written only when its content changes.

Every write is an etcd write and an event for every NRT informer (the NUMA-aware scheduler's), so an idle
node writes nothing: no periodic rewrite. What a periodic rewrite used to give, an object deleted or edited
by hand coming back, comes from `check()` instead: after a minute of quiet, one GET of the object from the
API server's watch cache (resourceVersion=0: no etcd read, no write, no event), and a write only when the
object is absent or another writer changed its content (its resourceVersion is not the one written). Why a
GET and not a watch: a watch holds a second connection open per node and needs its own reconnect and
relist logic for an event that happens by hand; the GET bounds the repair to a minute, as the old rewrite
did, at one read a minute.

The object is owned by the Node, so it goes when the Node goes; the Node's uid is read once, and again
whenever the object turns out to be absent (the Node may have been recreated with a new uid).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from numa_align.kubeapi import ApiError, KubeApiError, KubeClient, NotFound
from numa_align.settings import OPTIONS

log = logging.getLogger(__name__)

MIN_INTERVAL = 1.0
"""Seconds per write, sustained, however fast the pods change."""
BURST = 2
"""Writes allowed back to back after a quiet while (a token bucket: one token per MIN_INTERVAL, BURST at most).
A pod's deletion and the next pod's admission, a moment apart, are both written when they happen; with one
write per MIN_INTERVAL and no burst the second waited for the rest of the second (the tail of the lab's
freshness figure)."""
CHECK_EVERY = 60.0
"""Seconds of quiet after which the stored object is read to see that it is still the one written."""


class NodeNotFound(KubeApiError):
    """The node name is not a Node in the API server."""


class NrtWriter:
    """Writes the object built by `build(node_uid)` when its content changed, `burst` writes back to back and
    then one per `min_interval`; `check()` repairs an object changed or deleted by someone else."""

    def __init__(self, client: KubeClient, node_name: str, *, clock: Callable[[], float] = time.monotonic,
                 min_interval: float = MIN_INTERVAL, check_every: float = CHECK_EVERY, burst: int = BURST) -> None:
        self.client = client
        self.node_name = node_name
        self.min_interval = min_interval
        self.burst = burst
        self._tokens = float(burst)
        self._counted_at: float | None = None
        self.check_every = check_every
        self.last_published: dict[str, Any] | None = None
        """The object last written (without its resourceVersion)."""
        self.writes = 0
        self.checks = 0
        self.pending = False
        """A change waits for a write to be allowed (`next_write_in`)."""
        self.attempted_at: float | None = None
        self._clock = clock
        self._node_uid: str | None = None
        self._uid_fresh = False
        self._version: str | None = None
        self._quiet_since: float | None = None

    def publish(self, build: Callable[[str], dict[str, Any]]) -> str:
        """Write the object if its content changed and a write is allowed; returns the status."""
        self._uid_fresh = False
        nrt = build(self.uid())
        now = self._clock()
        if self.last_published is not None and _content(nrt) == _content(self.last_published):
            self.pending = False
            return "up to date"
        if self.next_write_in(now) > 0:
            self.pending = True
            return f"change waiting (at most {self.burst} writes at once, then one per {self.min_interval:g}s)"
        self._tokens -= 1
        self.attempted_at, self.pending = now, False
        written, nrt = self._write(nrt, build)
        self._version = _version(written)
        first = self.last_published is None
        self.last_published, self._quiet_since = nrt, now
        self.writes += 1
        (log.info if first else log.debug)("wrote NodeResourceTopology %s (%d zones)", nrt["metadata"]["name"],
                                           len(nrt["zones"]))
        return "published"

    def next_write_in(self, now: float) -> float:
        """Seconds until a write is allowed (0: now), the bucket refilled up to `now`."""
        if self.min_interval <= 0:
            return 0.0
        if self._counted_at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._counted_at) / self.min_interval)
        self._counted_at = now
        return max(0.0, (1.0 - self._tokens) * self.min_interval)

    def check_due(self) -> bool:
        return (self.last_published is not None and self._quiet_since is not None
                and self._clock() - self._quiet_since >= self.check_every)

    def check(self) -> bool:
        """Read the stored object; True when it must be written again (absent, or another content)."""
        assert self.last_published is not None
        self._quiet_since = self._clock()
        self.checks += 1
        name = self.last_published["metadata"]["name"]
        try:
            stored = self.client.get_nrt(name, cached=True)
        except NotFound:
            log.info("NodeResourceTopology %s is gone (deleted, or collected with its Node); creating it again",
                     name)
            self._version, self.last_published = None, None
            return True
        if _version(stored) != self._version and _content(stored) != _content(self.last_published):
            log.info("NodeResourceTopology %s was changed by someone else; writing it again", name)
            self._version, self.last_published = _version(stored), None
            return True
        return False

    def uid(self, again: bool = False) -> str:
        """The Node's uid: read once, and again when asked unless it was read in this poll already."""
        if self._node_uid is None or (again and not self._uid_fresh):
            try:
                node = self.client.get_node(self.node_name)
            except NotFound:
                self._node_uid = None
                raise NodeNotFound(
                    f"node {self.node_name!r} is not in the API server at {self.client.server}: a wrong or stale "
                    f"{OPTIONS['node_name'].variable} ({OPTIONS['node_name'].flag}), or the Node was deleted"
                ) from None
            self._node_uid, self._uid_fresh = node["metadata"]["uid"], True
        return self._node_uid

    def _write(self, nrt: dict[str, Any], build: Callable[[str], dict[str, Any]]) -> tuple[dict[str, Any], dict]:
        """Update the object (create it when absent); a conflict is read again and retried once."""
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
        nrt = build(self.uid(again=True))
        try:
            return self.client.create_nrt(nrt), nrt
        except ApiError as exc:
            if exc.status != 409:
                raise
        self._version = _version(self.client.get_nrt(nrt["metadata"]["name"]))  # created meanwhile
        return self.client.update_nrt(_with_version(nrt, self._version)), nrt


def _content(nrt: dict[str, Any]) -> tuple[Any, ...]:
    metadata = nrt.get("metadata") or {}
    return nrt.get("zones"), nrt.get("attributes"), metadata.get("ownerReferences"), metadata.get("annotations")


def _version(stored: dict[str, Any]) -> str | None:
    return stored.get("metadata", {}).get("resourceVersion")


def _with_version(nrt: dict[str, Any], version: str | None) -> dict[str, Any]:
    body = copy.deepcopy(nrt)
    if version is not None:
        body["metadata"]["resourceVersion"] = version
    return body
