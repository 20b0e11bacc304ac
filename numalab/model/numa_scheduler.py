"""The topology-aware scheduler on the control plane: a second scheduler beside kube-scheduler.

Pods opt in with `schedulerName: numa-aware`; every other pod keeps the default scheduler. Why second and
not the default profile: upstream advises it (the plugin's view of a node is only as fresh as its
NodeResourceTopology object, a risk a user should take per workload, not for kube-system's pods), a broken
or absent NUMA-aware scheduler then leaves the cluster's own pods schedulable, and the lab can run the same
workload under both schedulers side by side. Its binary registers only NodeResourceTopologyMatch
(numalab.k8s.scheduler) on top of kube-scheduler's default plugins; the profile enables it at every
extension point it has (multiPoint). It holds its own Lease and its own identity (numa-lab:numa-scheduler),
bound to kube-scheduler's roles plus reading NodeResourceTopology objects.
"""

from __future__ import annotations

from typing import Any

from numalab.model.components import BIN_DIR, K8S_DIR, Component, kubeconfig_path
from numalab.model.errors import ValidationError

SCHEDULER_NAME = "numa-aware"
NAME = "numa-scheduler"  # the unit, the binary, its kubeconfig and its Lease
PLUGIN = "NodeResourceTopologyMatch"
CONFIG = f"{K8S_DIR}/{NAME}.yaml"
SECURE_PORT = 10260  # kube-scheduler has 10259 on the same host
LEASE_NAMESPACE = "kube-system"
RESYNC_SECONDS = 5
"""The plugin's reserve cache resync period: pods it placed count against their cell until the node's NRT
object shows them (its pod fingerprint matches), so a burst of pods never lands twice on a cell's last
CPUs; upstream advises at least 5 s."""
CACHE = {
    # Shared (the scheduler's own pod informer): numa-lab's build replaces the resync's pod filter, upstream's
    # Running pods only (scheduler_go/nrtadopt/bound.go), by every pod bound to the node and not finished.
    # numa-align's fingerprint covers every pod the kubelet admitted, so a pod bound but not yet admitted keeps
    # its reservation until the object shows it.
    "informerMode": "Shared",
    # Pods the default scheduler binds (DaemonSets, CoreDNS) mark a node for resync only when they hold
    # something exclusive (whole CPUs, NUMA-placed memory, devices); All would mark every node at each one.
    "foreignPodsDetect": "OnlyExclusiveResources",
    "resyncMethod": "Autodetect",  # from the object's nodeTopologyPodsFingerprintMethod attribute
    "resyncScope": "OnlyResources",
}

UNSCHEDULABLE_RETRY_SECONDS = 30
UNSCHEDULABLE_RETRY = f"{UNSCHEDULABLE_RETRY_SECONDS}s"
"""--pod-max-in-unschedulable-pods-duration (upstream 5m; deprecated, still parsed by v1.36.3): a node's cached
view goes stale and fresh again with no cluster event to wake the pods it turned away. Every update of a
default-scheduler pod with exclusive resources on a node (a pod stuck in ImagePullBackOff flips its waiting
reason at each back-off) marks that node "foreign" until the next resync, 5 s later; a NUMA-aware pod that
meets it then is told "invalid node topology data" and waited 5 minutes in the unschedulable queue (seen in
the lab: still Pending after 180 s beside a stuck pod). 30 s: such a pod is tried again within half a minute;
the cost is a retry of each unschedulable NUMA-aware pod twice a minute."""

VERBOSITY = 2
"""klog -v: 2 is where the plugin's cache says what it does to a node ("marked with foreign pods", "flushing":
its view of the node taken again from the node's object) and the scheduler says why a pod did not fit: what
a user reads when a NUMA-aware pod waits, and how the cluster test sees which object the cache took. A few
lines per scheduled pod; kube-scheduler's common production level."""

LEASE_TIMING = {"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "10s"}
"""One instance runs: its Lease only says that it runs (numalab.lint.cluster_schedulers trusts one renewed within
60 s), and a graceful restart releases it. kube-scheduler's default renewal every 2 s made it 15 of an idle
lab's 24 Lease writes in 30 s, each an etcd write on the emulated server."""


def numa_scheduler() -> Component:
    conf = kubeconfig_path(NAME)
    return Component(
        NAME,
        f"NUMA-aware scheduler (schedulerName {SCHEDULER_NAME}, {PLUGIN})",
        (
            f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}",
            "--bind-address=127.0.0.1",
            f"--config={CONFIG}",
            f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY}",
            f"--secure-port={SECURE_PORT}",
            f"--v={VERBOSITY}",
        ),
        after=("kube-apiserver.service",),
    )


def binary_path() -> str:
    return f"{BIN_DIR}/{NAME}"


SCORING_STRATEGIES = ("LeastAllocated", "MostAllocated", "BalancedAllocation", "LeastNUMANodes")
"""The plugin's scoringStrategy types (scheduler-plugins apis/config ScoringStrategyType). The lab runs the
first, upstream's default; the fleet simulation (numalab.fleet) runs one scheduler per strategy to compare them."""


def numa_scheduler_configuration(
    strategy: str = "LeastAllocated",
    *,
    scheduler_name: str = SCHEDULER_NAME,
    kubeconfig: str | None = None,
    leader_elect: bool = True,
) -> dict[str, Any]:
    """KubeSchedulerConfiguration: one profile, the default plugins plus NodeResourceTopologyMatch scoring by
    `strategy`. The defaults are the lab's scheduler; the fleet runs several at once, each with its own
    `scheduler_name` and `kubeconfig`, and without leader election (one instance each, no Lease writes)."""
    if strategy not in SCORING_STRATEGIES:
        known = ", ".join(SCORING_STRATEGIES)
        raise ValidationError("scoringStrategy.type", f"expected one of {known}, got {strategy!r}")
    election: dict[str, Any] = {"leaderElect": False}
    if leader_elect:
        election = {"leaderElect": True, "resourceName": NAME, "resourceNamespace": LEASE_NAMESPACE, **LEASE_TIMING}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig or kubeconfig_path(NAME)},
        "leaderElection": election,
        "profiles": [{
            "schedulerName": scheduler_name,
            "plugins": {"multiPoint": {"enabled": [{"name": PLUGIN}]}},
            "pluginConfig": [{
                "name": PLUGIN,
                "args": {
                    "scoringStrategy": {"type": strategy},
                    "cacheResyncPeriodSeconds": RESYNC_SECONDS,
                    "cache": CACHE,
                },
            }],
        }],
    }
