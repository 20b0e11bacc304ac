"""Case 8: where the CPU Manager runs with full-pcpus-only, the kubelet refuses a Guaranteed pod that asks
for part of a core (SMTAlignmentError) instead of splitting one; case 1 shows the whole cores it gives.

The pinned pods of case 1 are gone by now, so the refusal is for the split core, not for lack of CPUs.
"""

from __future__ import annotations

from typing import Any

from probe_pods import pinned_pod
from results import describe_failures

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"


def judge_split_core(pod: dict[str, Any]) -> tuple[bool | None, str]:
    """(True, why) once the kubelet rejected the pod for SMT alignment; (False, why) for any other outcome."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    said = " ".join(str(status.get(key) or "") for key in ("reason", "message")).strip()
    if phase == "Failed":
        return (SMT_ALIGNMENT_ERROR in said), f"rejected: {said or 'no reason given'}"
    if phase in ("Running", "Succeeded"):
        return False, f"admitted and {phase}: the kubelet handed out part of a core"
    return None, phase


def test_part_of_a_core_is_refused_under_full_pcpus_only(cluster, workers, settings, pinned_cpus, results):
    bodies = {}
    for worker, nodes in workers.items():
        if pinned_cpus[worker] == 1:
            results.add(worker, nodes[0], "whole-core", None, detail="no full-pcpus-only on this kubelet")
            continue
        body = pinned_pod(worker, nodes[0], settings.probe_image, settings.capacity_mode, cpus=1)
        body["metadata"]["name"] = body["metadata"]["name"].replace("pin-", "split-", 1)
        bodies[worker] = body
    cluster.create_pods(bodies.values())
    try:
        for worker, body in bodies.items():
            ok, why = cluster.wait_until(body["metadata"]["name"], judge_split_core)
            results.add(worker, workers[worker][0], "whole-core", ok, cpus="asked 1",
                        detail=f"{why} (a core is {pinned_cpus[worker]} threads)")
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("whole-core")
    assert not failures, describe_failures(failures)
