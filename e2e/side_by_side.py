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

Pure helpers here (pod bodies, outcomes, tallies, verdicts); the waits that drive a cluster through e2e/kube.py
(`run_side`, `run_deployment` and what they wait for) are in side_by_side_waits.py.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from probe_pods import RESTRICTED, SUITE_LABEL

CASE = "numa-scheduler"
NUMA_AWARE = "numa-aware"
DEFAULT = "default-scheduler"
MEMORY = "64Mi"
RESYNCING = "invalid node topology data"
PLUGIN_REASONS = ("cannot align", RESYNCING)
"""NodeResourceTopologyMatch's Filter reasons: no cell fits; the node's object is being resynced."""
DEPLOYMENT_LABEL = "numa-lab.e2e/deployment"
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
