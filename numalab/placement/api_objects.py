"""Cluster-side decisions over API objects as plain dicts: a Node's numa-align counts and readiness, a kubelet's
/configz policies, and whether a pod too big for its NUMA node was turned away as it should be."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from numa_align.devices import node_of_resource

from numalab.model.errors import ValidationError
from numalab.placement.pod_specs import whole_count

TOPOLOGY_AFFINITY_ERROR = re.compile(r"Topology.*Affinity.*Error")


def numa_align_allocatable(allocatable: Mapping[str, Any]) -> dict[int, int]:
    """{node: count} of numa-align/numa-N in a Node's status.allocatable; zero counts included."""
    found: dict[int, int] = {}
    for name, value in allocatable.items():
        node = node_of_resource(name)
        if node is not None:
            found[node] = whole_count(value, f"status.allocatable.{name}")
    return found


def kubelet_policies(configz: Mapping[str, Any]) -> dict[str, str]:
    """The manager policies from a kubelet's /configz answer ({"kubeletconfig": {...}}), with the
    kubelet's defaults for fields it leaves out."""
    config = configz.get("kubeletconfig")
    if not isinstance(config, Mapping):
        raise ValidationError("configz.kubeletconfig", "missing: not a kubelet /configz answer")
    return {
        "cpuManagerPolicy": str(config.get("cpuManagerPolicy") or "none"),
        "memoryManagerPolicy": str(config.get("memoryManagerPolicy") or "None"),
        "topologyManagerPolicy": str(config.get("topologyManagerPolicy") or "none"),
        "topologyManagerScope": str(config.get("topologyManagerScope") or "container"),
    }


def judge_exhaustion(pod: Mapping[str, Any], capacity_mode: str, resource: str) -> tuple[bool | None, str]:
    """Outcome of a pod that needs more CPUs than its NUMA node has free.

    Slot mode: the kubelet must reject it at admission (phase Failed, reason TopologyAffinityError).
    cpus mode: there are too few `resource` (numa-align/numa-N) devices, so the scheduler must leave it
    Pending (PodScheduled False, reason Unschedulable, naming the resource). Returns (True, why) when
    it behaved, (False, why) when it did something else for good, and (None, state) while the outcome
    is not known yet.
    """
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    said = " ".join(str(status.get(key) or "") for key in ("reason", "message")).strip()
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    unschedulable = scheduled is not None and scheduled.get("status") == "False" \
        and scheduled.get("reason") == "Unschedulable"
    if phase in ("Running", "Succeeded"):
        return False, f"admitted and {phase}: the node had room after all"
    if capacity_mode == "cpus":
        if unschedulable:
            message = str(scheduled.get("message", ""))
            if f"Insufficient {resource}" not in message:
                return False, f"Unschedulable, but not for lack of {resource}: {message}"
            return True, f"Pending, Unschedulable: {message}"
        if phase == "Failed":
            return False, f"Failed ({said}); expected to stay Pending unschedulable"
        return None, f"{phase}, not yet judged unschedulable"
    if phase == "Failed":
        if TOPOLOGY_AFFINITY_ERROR.search(said):
            return True, f"rejected: {said}"
        return False, f"Failed for another reason: {said or 'none given'}"
    if unschedulable:
        return False, f"Unschedulable ({scheduled.get('message', '')}); expected the kubelet to reject it"
    return None, f"{phase}, not yet rejected"


def ready_since(node: Mapping[str, Any], since_epoch: float) -> bool:
    """True when the Node's Ready condition is True and was last posted at or after `since_epoch`
    (seconds, on the node's clock): the kubelet has reported since it was restarted."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") != "Ready":
            continue
        beat = condition.get("lastHeartbeatTime")
        if condition.get("status") != "True" or not beat:
            return False
        return datetime.fromisoformat(str(beat).replace("Z", "+00:00")).timestamp() >= since_epoch
    return False
