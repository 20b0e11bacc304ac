"""Case 9: the same Guaranteed pods under the default scheduler and under the NUMA-aware one, side by side.

Pressure first: on every worker a pinned pod takes CPUs of one cell, so the worker's free CPUs are split
between its cells. Then `contenders` Guaranteed pods (plain cpu + memory, no numa-align request), each
asking for more CPUs than some workers have free in any single cell, are created at once. The kubelets
run single-numa-node: a pod bound where no cell fits it is admitted and then rejected
(TopologyAffinityError). The default scheduler sees node totals and binds such pods; the NUMA-aware one
reads each cell's `available` from the NodeResourceTopology objects and leaves them Pending ("cannot
align pod"). How many fit is read from those objects after the pressure: the sum over cells of
available CPUs // CPUs per pod.

Last, a Deployment of `contenders` replicas under the NUMA-aware scheduler: what fits Running, the rest
Pending, and no rejection loop (a ReplicaSet whose pods the kubelet rejects makes new ones without end, the
loop the default scheduler causes).

Pure helpers (pod bodies, outcomes, tallies) plus `run_side` and `run_deployment`, which drive a cluster
through e2e/kube.py; the e2e case and bench/numa_scheduler_bench.py both use them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import api_outages
from numa_align.fingerprint import ATTRIBUTE, pod_fingerprint
from probe_pods import RESTRICTED, SUITE_LABEL

CASE = "numa-scheduler"
NUMA_AWARE = "numa-aware"
DEFAULT = "default-scheduler"
MEMORY = "64Mi"
SETTLE_SECONDS = 360.0
STABLE_SECONDS = 15.0
RESYNCING = "invalid node topology data"
PLUGIN_REASONS = ("cannot align", RESYNCING)
"""NodeResourceTopologyMatch's Filter reasons: no cell fits; the node's object is being resynced."""


RESYNC_GRACE_SECONDS = 12.0
"""Two of the plugin's resync periods (numalab.model.numa_scheduler.RESYNC_SECONDS, 5 s) and room."""
RETRY_STABLE_SECONDS = 40.0
"""How long a pod the plugin found no cell for must stay Pending before that is its outcome: the scheduler tries
it again at the latest after --pod-max-in-unschedulable-pods-duration (30 s in the lab), and a first try may
have met a cache not yet resynced after the side before (r3, r8: all three pending "cannot align", decided in
2-3 s, where one fits)."""
DEPLOYMENT_LABEL = "numa-lab.e2e/deployment"
DEPLOYMENT_STABLE_SECONDS = 30.0
"""A Deployment's picture must hold this long: a rejection loop shows within seconds of a bind."""
REJECTED = "rejected"
RUNNING = "running"
PENDING = "pending"


def contender_spec(image: str, cpus: int, scheduler: str, workers: Iterable[str]) -> dict[str, Any]:
    """A Guaranteed pod's spec asking `cpus` whole CPUs and memory, nothing NUMA-specific; kept to the workers."""
    resources = {"cpu": str(cpus), "memory": MEMORY}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                   "values": sorted(workers)}]}]}}},
        "containers": [{"name": "app", "image": image, "command": ["sleep", "3600"],
                        "resources": {"requests": resources, "limits": resources},
                        "securityContext": RESTRICTED}],
    }
    if scheduler != DEFAULT:
        spec["schedulerName"] = scheduler
    return spec


def contender_pod(name: str, image: str, cpus: int, scheduler: str, workers: Iterable[str],
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A contender pod: never restarted, so a rejection stays visible as its phase."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {SUITE_LABEL: CASE, **(labels or {})}},
            "spec": {"restartPolicy": "Never", **contender_spec(image, cpus, scheduler, workers)}}


def contender_deployment(name: str, image: str, cpus: int, scheduler: str, workers: Iterable[str],
                         replicas: int) -> dict[str, Any]:
    """`replicas` contenders as one Deployment; its pods carry the label `selector(name)` names."""
    labels = {SUITE_LABEL: CASE, DEPLOYMENT_LABEL: name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {DEPLOYMENT_LABEL: name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": contender_spec(image, cpus, scheduler, workers)}}}


def selector(deployment: str) -> str:
    return f"{DEPLOYMENT_LABEL}={deployment}"


def fits(nrt_objects: Iterable[Mapping[str, Any]], cpus: int) -> int:
    """How many pods of `cpus` CPUs fit, each in one cell: Σ over zones of available cpu // cpus."""
    total = 0
    for nrt in nrt_objects:
        for zone in nrt.get("zones") or []:
            for resource in zone.get("resources") or []:
                if resource["name"] == "cpu":
                    total += int(resource["available"]) // cpus
    return total


def outcome(pod: Mapping[str, Any]) -> tuple[str | None, str]:
    """(running | rejected | pending | None while undecided, why) for a contender pod."""
    status = pod.get("status") or {}
    reason = status.get("reason") or ""
    if status.get("phase") == "Failed":
        return REJECTED, f"{reason}: {status.get('message', '')}".strip()
    if status.get("phase") == "Running":
        return RUNNING, pod["spec"].get("nodeName", "")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            message = condition.get("message", "")
            # A node was being resynced: the scheduler tries the pod again (at the latest when it flushes its
            # unschedulable pods, 5 min), so this is not the pod's outcome yet.
            return (None if RESYNCING in message else PENDING), message
    return None, status.get("phase") or "created"


class Tally:
    """Counts over `outcomes` (pod name -> (kind, why)), shared by a Side and a DeploymentRun."""

    outcomes: Mapping[str, tuple[str, str]]

    def count(self, kind: str) -> int:
        return Counter(kind_ for kind_, _ in self.outcomes.values())[kind]

    def reasons(self, kind: str) -> list[str]:
        return sorted({why for kind_, why in self.outcomes.values() if kind_ == kind})


@dataclass(frozen=True)
class Side(Tally):
    """One scheduler's run: the outcome of each contender and how long until all were decided."""

    scheduler: str
    outcomes: Mapping[str, tuple[str, str]]
    seconds: float

    def summary(self) -> str:
        return (f"{self.count(RUNNING)} running, {self.count(REJECTED)} rejected (TopologyAffinityError), "
                f"{self.count(PENDING)} pending, all decided in {self.seconds:.0f} s")


AFFINITY_ERROR = "TopologyAffinityError"


def judge_default(side: Side) -> list[str]:
    """The baseline: the default scheduler must have bound at least one pod where no cell fits it, for the
    kubelet to reject it with TopologyAffinityError. Without one the scenario showed nothing the NUMA-aware
    side could be better at (the pressure did not split any worker's free CPUs), and the case says so."""
    rejected = [why for kind, why in side.outcomes.values() if kind == REJECTED]
    if any(why.startswith(AFFINITY_ERROR) for why in rejected):
        return []
    others = f" (rejected for other reasons: {sorted(set(rejected))})" if rejected else ""
    return [f"baseline did not happen: no pod of the default scheduler was rejected with {AFFINITY_ERROR}"
            f"{others}, so the comparison proves nothing; the pressure pods must leave some worker with more "
            "free CPUs than any one of its cells holds"]


def judge_numa_aware(side: Side, expected_running: int) -> list[str]:
    """The NUMA-aware scheduler's goal: no rejection, every pod that fits Running, the rest Pending with
    the plugin's reason."""
    problems = []
    if side.count(REJECTED):
        problems.append(f"{side.count(REJECTED)} rejected: {side.reasons(REJECTED)}")
    return problems + placement_problems(side, expected_running)


def placement_problems(tally: Tally, expected_running: int) -> list[str]:
    """What fits Running, the rest Pending with NodeResourceTopologyMatch's reason."""
    problems = []
    if tally.count(RUNNING) != expected_running:
        problems.append(f"{tally.count(RUNNING)} running, expected {expected_running} (pending: "
                        f"{tally.reasons(PENDING)})")
    others = [why for why in tally.reasons(PENDING) if not for_the_plugin(why)]
    if others:
        problems.append(f"pending for another reason than the plugin's: {others}")
    return problems


def for_the_plugin(why: str) -> bool:
    """A Pending pod's reason is one of NodeResourceTopologyMatch's (PLUGIN_REASONS)."""
    return any(reason in why for reason in PLUGIN_REASONS)


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


@dataclass(frozen=True)
class DeploymentRun(Tally):
    """A Deployment's pods: every one its ReplicaSet made (rejected ones too) and its outcome."""

    replicas: int
    outcomes: Mapping[str, tuple[str, str]]
    seconds: float

    def summary(self) -> str:
        return (f"Deployment of {self.replicas}: {len(self.outcomes)} pods made, {self.count(RUNNING)} running, "
                f"{self.count(REJECTED)} rejected, {self.count(PENDING)} pending, settled in {self.seconds:.0f} s")


def judge_deployment(run: DeploymentRun, expected_running: int) -> list[str]:
    """No rejection loop: no pod rejected, no pod made beyond the replicas, and placed as judge_numa_aware wants."""
    problems = []
    if run.count(REJECTED):
        problems.append(f"rejection loop: {run.count(REJECTED)} pods rejected")
    if len(run.outcomes) > run.replicas:
        problems.append(f"the ReplicaSet made {len(run.outcomes)} pods for {run.replicas} replicas")
    return problems + placement_problems(run, expected_running)


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
