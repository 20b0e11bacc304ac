"""numa-align's liveness: a coordination.k8s.io/v1 Lease per node, renewed while its NRT object is current.

The NRT object is written only when it changes, so its age says nothing about whether numa-align still
runs: an idle node's object may be days old and right. The Lease says it instead, as the kubelet's node
Lease does for the kubelet: the publisher renews it after each poll that found the object current, so a
Lease past `renewTime + leaseDurationSeconds` means the object has not been known current since renewTime
(numa-align stopped, its node is down, or it cannot reach the API server). `numalab top` reads it.

Where: kube-system/numa-align-<node>. Not kube-node-lease: that namespace holds the kubelets' Leases, one
per node named by the node, which the node lifecycle controller reads; a second kind of Lease there would
be mistaken for them by tools that list it. kube-system is where numa-align's DaemonSet and its
ServiceAccount live, so a Role there is all the right it needs. The Lease is owned by the Node, like the
NRT object, so it goes when the Node goes.

Timing: renewed every 40 s, valid for 120 s. Each renewal is an etcd write but a small one that wakes no
NodeResourceTopology informer (the scheduler does not watch Leases); 90 a node an hour. 120 s rides
through two missed renewals (a slow emulated node, an API server restart) before a node shows as stale,
and a stopped numa-align shows within two minutes.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from numa_align.kubeapi import ApiError, KubeClient, NotFound

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
RENEW_EVERY = 40.0
"""Seconds between renewals."""
DURATION = 120
"""leaseDurationSeconds: how long a renewal vouches for the object."""


def lease_name(node: str) -> str:
    return f"numa-align-{node}"


def micro_time(moment: datetime.datetime) -> str:
    """A MicroTime as the API server writes it: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(node: str, node_uid: str, holder: str, now: datetime.datetime, acquired: str | None = None,
               duration: int = DURATION) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(node),
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": "numa-align"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                 "acquireTime": acquired or micro_time(now), "renewTime": micro_time(now)},
    }


class NodeLease:
    """Renews kube-system/numa-align-<node> when due. `renew_if_due` raises the client's errors; a 403 is the
    caller's to log once (the NRT object is still published without the Lease) and is tried again a period
    later, like any failure here."""

    def __init__(self, client: KubeClient, node: str, holder: str, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
                 renew_every: float = RENEW_EVERY) -> None:
        self.client = client
        self.node = node
        self.holder = holder
        self.renew_every = renew_every
        self.renewals = 0
        self._clock = clock
        self._wall = wall
        self._due = 0.0
        self._stored: dict[str, Any] | None = None

    def renew_if_due(self, node_uid: Callable[[], str]) -> bool:
        """Renew when a period has passed since the last attempt; True when it was renewed now."""
        now = self._clock()
        if now < self._due:
            return False
        self._due = now + self.renew_every  # failed or not: the next attempt is a period away
        name = lease_name(self.node)
        if self._stored is None:
            try:
                self._stored = self.client.get_lease(NAMESPACE, name)
            except NotFound:
                body = lease_body(self.node, node_uid(), self.holder, self._wall())
                self._stored = self._created(body)
                self.renewals += 1
                return True
        try:
            self._stored = self.client.update_lease(self._renewed(self._stored, node_uid))
        except NotFound:  # deleted (by hand, or with its Node): created again
            self._stored = None
            self._stored = self._created(lease_body(self.node, node_uid(), self.holder, self._wall()))
        except ApiError as exc:
            self._stored = None  # read again next time (409: another writer; anything else: start over)
            if exc.status != 409:
                raise
            self._stored = self.client.get_lease(NAMESPACE, name)
            self._stored = self.client.update_lease(self._renewed(self._stored, node_uid))
        self.renewals += 1
        return True

    def _created(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.client.create_lease(body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        stored = self.client.get_lease(NAMESPACE, body["metadata"]["name"])  # created meanwhile
        return self.client.update_lease(self._renewed(stored, lambda: body["metadata"]["ownerReferences"][0]["uid"]))

    def _renewed(self, stored: dict[str, Any], node_uid: Callable[[], str]) -> dict[str, Any]:
        spec = stored.get("spec") or {}
        owners = stored.get("metadata", {}).get("ownerReferences") or []
        uid = owners[0]["uid"] if owners else node_uid()
        body = lease_body(self.node, uid, self.holder, self._wall(), spec.get("acquireTime"))
        body["metadata"]["resourceVersion"] = stored.get("metadata", {}).get("resourceVersion")
        return body
