"""Case 9's waits: `run_side` and `run_deployment` drive a cluster (e2e/kube.py's Cluster) and wait until every
contender has its outcome (`settle`), and the set-up waits before each side (the NRT objects back to the pressure
alone, every node's object resyncable). The pods, outcomes and verdicts are side_by_side.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import api_outages
from numa_align.fingerprint import ATTRIBUTE, pod_fingerprint
from side_by_side import PENDING, REJECTED, RUNNING, DeploymentRun, Side, fits, for_the_plugin, outcome, selector

from numalab.model.numa_scheduler import UNSCHEDULABLE_RETRY_SECONDS

SETTLE_SECONDS = 360.0
STABLE_SECONDS = 8.0
"""How long bare contenders' outcomes must hold once every one has one. Once the pods that fit run, no cell is left
for the ones Pending, so a later bind would be the scheduler's mistake: at its first try (within the wait before
this window) or at a retry, which the NRT updates after those binds trigger (numa-align writes within 2 s of an
admission) or the 30 s flush brings. 8 s holds the first; 15 s (before) did not reach the second either. In run wk
the NUMA-aware side's pods were all decided in 10 s and none changed after."""
RESYNC_GRACE_SECONDS = 12.0
"""Two of the plugin's resync periods (numalab.model.numa_scheduler.RESYNC_SECONDS, 5 s) and room."""
LEFTOVER_FLUSH_SECONDS = 30.0
"""kube-scheduler's queue moves unschedulable pods older than --pod-max-in-unschedulable-pods-duration back to
be tried on a fixed 30 s tick (flushUnschedulablePodsLeftover, pkg/scheduler/backend/queue), not at each pod's
own deadline."""
RETRY_STABLE_SECONDS = LEFTOVER_FLUSH_SECONDS + UNSCHEDULABLE_RETRY_SECONDS + 5.0
"""How long a pod the plugin found no cell for must stay Pending before that is its outcome. A first try may
have met a cache not yet resynced after the side before (r3, r8, run wb at 410c2f7: all three pending "cannot
align", decided in 2-3 s, where one fits); with no cluster event the scheduler tries such a pod again only at the
first flush tick after it has been unschedulable for the lab's duration (30 s): up to 60 s after, plus its back-off.
40 s (before) could end before that retry."""
DEPLOYMENT_STABLE_SECONDS = 20.0
"""A Deployment's picture must hold this long: a rejection loop shows within seconds of a bind (the kubelet
rejects at admission, and the ReplicaSet makes the next pod at once)."""


def settle(read_all: Callable[[], Mapping[str, Mapping[str, Any]]], at_least: int, timeout: float = SETTLE_SECONDS,
           stable: float = STABLE_SECONDS, every: float = 2.0, final: frozenset[str] = frozenset(),
           expected_running: int | None = None) -> tuple[dict[str, tuple[str, str]], float]:
    """Poll the pods `read_all` gives (name -> pod) until at least `at_least` were seen, every one seen has an
    outcome and none changed for `stable` seconds, RETRY_STABLE_SECONDS while one is Pending for the plugin (a
    Pending pod may still be bound when a cell frees up or the scheduler's cache resyncs) and fewer than
    `expected_running` (the pods that fit, when known) run: once that many run, no cell is left for a retry.
    A pod seen once is kept even when it is gone (a rejected one a ReplicaSet replaced). Once every outcome is
    in `final` (kinds that cannot change), nothing is left to wait for. Undecided ones after `timeout` count as
    pending. Returns the outcomes and the seconds until the last change."""
    start = time.monotonic()
    deadline = api_outages.Deadline(timeout)
    seen: dict[str, tuple[str | None, str]] = {}
    last_change = start
    while True:
        before = {name: kind for name, (kind, _) in seen.items()}
        for name, pod in read_all().items():
            seen[name] = outcome(pod)
        if {name: kind for name, (kind, _) in seen.items()} != before:
            last_change = time.monotonic()
        now = time.monotonic()
        decided = len(seen) >= at_least and all(kind is not None for kind, _ in seen.values())
        finished = decided and all(kind in final for kind, _ in seen.values())
        retried = any(kind == PENDING and for_the_plugin(why) for kind, why in seen.values()) and (
            expected_running is None or sum(kind == RUNNING for kind, _ in seen.values()) < expected_running)
        window = max(stable, RETRY_STABLE_SECONDS) if retried else stable
        if (decided and (finished or now - last_change >= window)) or deadline.passed():
            return ({name: (kind, why) if kind is not None else (PENDING, f"undecided after {timeout:.0f} s: {why}")
                     for name, (kind, why) in seen.items()}, last_change - start)
        time.sleep(every)


def wait_decided(read: Callable[[str], Mapping[str, Any]], names: list[str], timeout: float = SETTLE_SECONDS,
                 stable: float = STABLE_SECONDS, every: float = 2.0,
                 expected_running: int | None = None) -> tuple[dict[str, tuple[str, str]], float]:
    """`settle` for a fixed set of bare pods, read one by one: no controller replaces them, so a pod Running or
    rejected (Failed) has its final outcome; only a Pending one may still change."""
    return settle(lambda: {name: read(name) for name in names}, len(names), timeout, stable, every,
                  final=frozenset({RUNNING, REJECTED}), expected_running=expected_running)


def wait_fitting(read_all: Callable[[], list[Mapping[str, Any]]], cpus: int, expected: int,
                 timeout: float = 60.0, every: float = 2.0) -> int:
    """Wait until the NRT objects show `expected` fits again (the last side's pods gone); what they show."""
    deadline = time.monotonic() + timeout
    while True:
        found = fits(read_all(), cpus)
        if found == expected or time.monotonic() >= deadline:
            return found
        time.sleep(every)


def unsynced(nrt_objects: Iterable[Mapping[str, Any]], bound: Mapping[str, Iterable[tuple[str, str]]]) -> list[str]:
    """Nodes whose NRT object's pod fingerprint is not that of the pods the API shows bound to them, unfinished.

    numa-lab's scheduler build resyncs a node's object only when that fingerprint (method `all`: every pod the
    kubelet admitted, numa-align's) matches the pods it counts there: every bound pod neither Succeeded nor
    Failed. Until then the node is "invalid node topology data" to it (a pod bound, not yet admitted, included).
    """
    stale = []
    for nrt in nrt_objects:
        node = (nrt.get("metadata") or {}).get("name", "?")
        published = {a["name"]: a["value"] for a in nrt.get("attributes") or []}.get(ATTRIBUTE)
        if published != pod_fingerprint(bound.get(node, ())):
            stale.append(node)
    return sorted(stale)


def wait_resyncable(read_all: Callable[[], list[Mapping[str, Any]]],
                    read_bound: Callable[[], Mapping[str, Iterable[tuple[str, str]]]],
                    timeout: float = 60.0, every: float = 2.0, grace: float = RESYNC_GRACE_SECONDS) -> list[str]:
    """Wait until every node's object could be resynced (its fingerprint that of `read_bound()`'s pods for its
    node, Cluster.bound_pods), then for the plugin's resync to run; [] when it could, else the nodes that still
    could not after `timeout`. Contenders made before would find a node the last side's pods left marked
    (foreign or over-reserved) and wait for the scheduler's retry."""
    deadline = time.monotonic() + timeout
    while True:
        stale = unsynced(read_all(), read_bound())
        if not stale:
            time.sleep(grace)
            return []
        if time.monotonic() >= deadline:
            return stale
        time.sleep(every)


def run_side(cluster: Any, scheduler: str, bodies: list[dict[str, Any]], expected_running: int | None = None) -> Side:
    """Create the contenders at once, wait until each is decided (settle), delete them; the Side seen."""
    names = cluster.create_pods(bodies)
    try:
        decided, seconds = wait_decided(cluster.pod, names, expected_running=expected_running)
    finally:
        cluster.delete_pods(names)
    return Side(scheduler, decided, seconds)


def run_deployment(cluster: Any, body: dict[str, Any], expected_running: int | None = None) -> DeploymentRun:
    """Create the Deployment, watch its pods until the picture holds, delete it; what was seen."""
    name = cluster.create_deployment(body)
    replicas = body["spec"]["replicas"]
    try:
        decided, seconds = settle(lambda: {pod["metadata"]["name"]: pod
                                           for pod in cluster.pods_labelled(selector(name))},
                                  replicas, stable=DEPLOYMENT_STABLE_SECONDS, expected_running=expected_running)
    finally:
        cluster.delete_deployment(name, selector(name))
    return DeploymentRun(replicas, decided, seconds)
