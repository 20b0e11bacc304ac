"""Case 9: the same Guaranteed pods under the default scheduler and under the NUMA-aware one, side by side.

Pressure first: on every worker a pinned pod takes CPUs of one cell, so the worker's free CPUs are split
between its cells. Then `contenders` Guaranteed pods (plain cpu + memory, no numa-align request), each
asking for more CPUs than some workers have free in any single cell, are created at once. The kubelets
run single-numa-node: a pod bound where no cell fits it is admitted and then rejected
(TopologyAffinityError). The default scheduler sees node totals and binds such pods; the NUMA-aware one
reads each cell's `available` from the NodeResourceTopology objects and leaves them Pending ("cannot
align pod"). How many fit is read from those objects after the pressure: the sum over cells of
available CPUs // CPUs per pod.

Pure helpers (pod bodies, outcomes, tallies) plus `run_side` and `deployment_rejections`, which drive a
cluster through e2e/kube.py; the e2e case and bench/numa_scheduler_bench.py both use them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from probe_pods import RESTRICTED, SUITE_LABEL

CASE = "numa-scheduler"
NUMA_AWARE = "numa-aware"
DEFAULT = "default-scheduler"
MEMORY = "64Mi"
SETTLE_SECONDS = 360.0
STABLE_SECONDS = 15.0
PLUGIN_REASONS = ("cannot align", "invalid node topology data")
"""NodeResourceTopologyMatch's Filter reasons: no cell fits; the node's object is being resynced."""
REJECTED = "rejected"
RUNNING = "running"
PENDING = "pending"


def contender_pod(name: str, image: str, cpus: int, scheduler: str, workers: Iterable[str],
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Guaranteed pod asking `cpus` whole CPUs and memory, nothing NUMA-specific; kept to the workers."""
    resources = {"cpu": str(cpus), "memory": MEMORY}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
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
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {SUITE_LABEL: CASE, **(labels or {})}}, "spec": spec}


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
            return PENDING, condition.get("message", "")
    return None, status.get("phase") or "created"


@dataclass(frozen=True)
class Side:
    """One scheduler's run: the outcome of each contender and how long until all were decided."""

    scheduler: str
    outcomes: Mapping[str, tuple[str, str]]
    seconds: float

    def count(self, kind: str) -> int:
        return Counter(kind_ for kind_, _ in self.outcomes.values())[kind]

    def reasons(self, kind: str) -> list[str]:
        return sorted({why for kind_, why in self.outcomes.values() if kind_ == kind})

    def summary(self) -> str:
        return (f"{self.count(RUNNING)} running, {self.count(REJECTED)} rejected (TopologyAffinityError), "
                f"{self.count(PENDING)} pending, all decided in {self.seconds:.0f} s")


def judge_numa_aware(side: Side, expected_running: int) -> list[str]:
    """The NUMA-aware scheduler's goal: no rejection, every pod that fits Running, the rest Pending with
    the plugin's reason."""
    problems = []
    if side.count(REJECTED):
        problems.append(f"{side.count(REJECTED)} rejected: {side.reasons(REJECTED)}")
    if side.count(RUNNING) != expected_running:
        problems.append(f"{side.count(RUNNING)} running, expected {expected_running}")
    unaligned = [why for why in side.reasons(PENDING) if not any(reason in why for reason in PLUGIN_REASONS)]
    if unaligned:
        problems.append(f"pending for another reason than the plugin's: {unaligned}")
    return problems


def wait_decided(read: Callable[[str], Mapping[str, Any]], names: list[str], timeout: float = SETTLE_SECONDS,
                 stable: float = STABLE_SECONDS, every: float = 2.0) -> tuple[dict[str, tuple[str, str]], float]:
    """Poll until every pod has an outcome and none changed for `stable` seconds (a Pending pod may still be
    bound when a cell frees up or the scheduler's cache resyncs); undecided ones after `timeout` count as
    pending. Returns the outcomes and the seconds until the last change."""
    start = time.monotonic()
    decided: dict[str, tuple[str, str]] = {}
    last_change = start
    while True:
        now_decided = {}
        for name in names:
            kind, why = outcome(read(name))
            if kind is not None:
                now_decided[name] = (kind, why)
        if {n: k for n, (k, _) in now_decided.items()} != {n: k for n, (k, _) in decided.items()}:
            last_change = time.monotonic()
        decided = now_decided
        now = time.monotonic()
        if (len(decided) == len(names) and now - last_change >= stable) or now - start >= timeout:
            for name in names:
                decided.setdefault(name, (PENDING, f"undecided after {timeout:.0f} s"))
            return decided, last_change - start
        time.sleep(every)


def wait_fitting(read_all: Callable[[], list[Mapping[str, Any]]], cpus: int, expected: int,
                 timeout: float = 60.0, every: float = 2.0) -> int:
    """Wait until the NRT objects show `expected` fits again (the last side's pods gone); what they show."""
    deadline = time.monotonic() + timeout
    while True:
        found = fits(read_all(), cpus)
        if found == expected or time.monotonic() >= deadline:
            return found
        time.sleep(every)


def run_side(cluster: Any, scheduler: str, bodies: list[dict[str, Any]]) -> Side:
    """Create the contenders at once, wait until each is decided, delete them; the Side seen."""
    names = cluster.create_pods(bodies)
    try:
        decided, seconds = wait_decided(cluster.pod, names)
    finally:
        cluster.delete_pods(names)
    return Side(scheduler, decided, seconds)
