"""Which of the kubelet's pods the NUMA-aware scheduler counts: the fingerprinted set, from the API's phases.

What the scheduler compares (sigs.k8s.io/scheduler-plugins v0.35.4-devel, pkg/noderesourcetopology):
`OverReserve.Resync` (cache/overreserve.go) builds `makeNodeToPodDataMap` from the pod lister, keeping the
pods the `PodFilterFunc` accepts, grouped by spec.nodeName; `podFingerprintForNodeTopology` (cache/store.go)
reads the object's nodeTopologyPodsFingerprint (and, with resyncMethod Autodetect, its method attribute:
"all" here, so every kept pod counts) and `checkPodFingerprintForNode` signs the kept pods' (namespace,
name) with podfingerprint and compares. The filter comes from `podprovider.NewFromHandle`: with
informerMode Shared (the lab's) it is `IsPodRelevantShared`, `pod.Status.Phase == PodRunning`; Dedicated
would use `IsPodRelevantDedicated`, every phase but Pending. A node with no Running pod at all is never
resynced by upstream ("cannot find any pod for node"); numa-scheduler's build flushes it when this
object's fingerprint is the empty set's (numalab/k8s/scheduler_go/nrtadopt/idle.go).

The kubelet's PodResources List has no phases and lists every admitted, not yet terminated pod, a pod stuck
Pending in ImagePullBackOff included (its CPUs are allocated at admission). So the fingerprint covers the
kubelet's pods that the API server says are Running: the same set as the scheduler's once the two agree,
and never a pod whose resources the object does not account for (a Pending pod's CPUs are still counted
as used, which only makes the object cautious).

Why a list and not a watch: an idle node needs no request at all. The Running pods of this node are listed
(metadata only, from the watch cache) when the kubelet's set changed, and again only while the two views
disagree (a pod not yet Running, or Running in the API but gone from the kubelet): at the poll interval for
the first FAST_SECONDS of a disagreement (a pod's start takes 5-30 s on an emulated node, and until the
object's fingerprint counts it the scheduler holds that node out of its resync), then doubling up to a
minute: a pod that starts is seen within one poll of running, a pod stuck Pending costs one list a minute
once its first minute is over. A watch would hold a second connection and a thread per node and wake on
every status change of every pod there (probes), for the same answer.

When the list fails: a 403 (the "list pods" right missing) falls back to the kubelet's whole set (what
numa-align published before: right whenever every pod runs; a fingerprint only makes the scheduler trust the
object when both sets are equal, so it cannot mislead it) and says so once; any other failure raises, and
the object is not written with a fingerprint nobody checked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from numa_align.backoff import Backoff
from numa_align.kubeapi import ApiError

log = logging.getLogger(__name__)

RELIST_MOST = 60.0
"""Seconds between lists at most while the kubelet's and the API's views disagree."""
FAST_SECONDS = 60.0
"""Seconds of a disagreement during which the pods are listed at every poll before the lists back off."""
FORBIDDEN_RETRY = 600.0
"""Seconds before a list refused with 403 is tried again (the right may have been granted meanwhile)."""

Pod = tuple[str, str]
"""(namespace, name)."""


class RunningPods:
    """`counted(kubelet)` is the subset of the kubelet's pods the scheduler counts, listing the API's Running
    pods only when due (see the module docstring); `lists` counts the lists made."""

    def __init__(self, list_running: Callable[[], set[Pod]], first: float, *,
                 clock: Callable[[], float] = time.monotonic, most: float = RELIST_MOST) -> None:
        self._list_running = list_running
        self._clock = clock
        self._relist = Backoff(first, most, clock=clock)
        self._kubelet: frozenset[Pod] | None = None
        self._running: frozenset[Pod] | None = None
        self._forbidden_until: float | None = None
        self._disagree_since: float | None = None
        self.lists = 0
        self.fallback = False
        """True while the fingerprint covers the kubelet's whole set (the list was refused)."""

    def due(self, kubelet: frozenset[Pod]) -> bool:
        """Whether `counted` would list now."""
        if self._forbidden_until is not None:
            return kubelet != self._kubelet or self._clock() >= self._forbidden_until
        return self._running is None or kubelet != self._kubelet or (
            self._disagree() and self._relist.is_due())

    def counted(self, kubelet: frozenset[Pod]) -> frozenset[Pod]:
        """The kubelet's pods that are Running in the API. Raises the client's errors but a 403."""
        if not self.due(kubelet):
            return self._result(kubelet)
        changed = kubelet != self._kubelet
        try:
            self._running = frozenset(self._list_running())
        except ApiError as exc:
            if exc.status != 403:
                raise
            if self._forbidden_until is None:
                log.warning("cannot list this node's pods (%s); the pod fingerprint covers every pod the kubelet "
                            "lists, so a pod that is not Running keeps the scheduler from trusting the object "
                            "until it runs", exc)
            self._forbidden_until = self._clock() + FORBIDDEN_RETRY
            self._kubelet, self._running, self.fallback = kubelet, None, True
            return kubelet
        finally:
            self.lists += 1
        if self._forbidden_until is not None:
            log.info("listing this node's pods works again: the fingerprint covers its Running pods")
            self._forbidden_until, self.fallback = None, False
        self._kubelet = kubelet
        if changed:
            self._relist.reset()
        if not self._disagree():
            self._disagree_since = None
        elif self._disagree_since is None or self._clock() - self._disagree_since < FAST_SECONDS:
            self._disagree_since = self._disagree_since if self._disagree_since is not None else self._clock()
            self._relist.reset()
            self._relist.due = self._clock() + self._relist.first  # the next poll
        else:
            self._relist.failed()
        return self._result(kubelet)

    def _disagree(self) -> bool:
        return self._running is not None and self._kubelet != self._running

    def _result(self, kubelet: frozenset[Pod]) -> frozenset[Pod]:
        return kubelet if self._running is None else kubelet & self._running
