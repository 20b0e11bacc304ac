"""Case 4: a pod needing more CPUs than node N has free is refused (kubelet or scheduler, by mode)."""

from __future__ import annotations

from numa_align.cpulist import parse_cpulist
from numa_align.devices import resource_name
from probe_pods import exhaustion_pod
from results import describe_failures

from numalab.model.quantity import parse_cpu_millis
from numalab.placement.api_objects import judge_exhaustion

OUTCOME_TIMEOUT = 120.0
"""Seconds for the kubelet to reject the pod (slot mode) or the scheduler to mark it unschedulable."""


def _cpus_to_ask(report: dict, node: int, capacity_mode: str) -> int:
    """More than node N can give: its allocatable cpus + 1, and in cpus mode also more than its devices."""
    on_node = len(parse_cpulist(report["allocatable"]["cpus"].get(str(node), "")))
    if capacity_mode == "cpus":
        devices = report["allocatable"]["devices"].get(resource_name(node), {}).get("count", 0)
        return max(on_node, devices) + 1
    return on_node + 1


def _run_wave(bodies: dict, cluster, settings, results) -> None:
    cluster.create_pods(bodies.values())
    try:
        for (worker, node), body in bodies.items():
            resource = resource_name(node)
            ok, why = cluster.wait_until(
                body["metadata"]["name"],
                lambda pod, r=resource: judge_exhaustion(pod, settings.capacity_mode, r),
                timeout=OUTCOME_TIMEOUT,
            )
            cpus = body["spec"]["containers"][0]["resources"]["limits"]["cpu"]
            results.add(worker, node, "exhaustion", ok, cpus=f"asked {cpus}", detail=why)
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())


def test_pod_larger_than_its_numa_node_is_refused(cluster, workers, settings, inspect_node, pinned_cpus, results):
    bodies = {}
    for worker, nodes in workers.items():
        try:
            report = inspect_node(worker)
        except AssertionError as exc:
            for node in nodes:
                results.add(worker, node, "exhaustion", False, detail=str(exc))
            continue
        worker_cpus = parse_cpu_millis(cluster.node(worker)["status"]["allocatable"]["cpu"]) // 1000
        for node in nodes:
            wanted = _cpus_to_ask(report, node, settings.capacity_mode)
            wanted = -(-wanted // pinned_cpus[worker]) * pinned_cpus[worker]  # whole cores: else SMTAlignmentError
            if settings.capacity_mode == "slots" and wanted > worker_cpus:
                results.add(worker, node, "exhaustion", False,
                            detail=f"cannot build the case: {wanted} cpus exceed the worker's {worker_cpus} "
                                   "allocatable, so the scheduler, not the kubelet, would refuse it")
                continue
            bodies[(worker, node)] = exhaustion_pod(worker, node, wanted, settings.probe_image,
                                                    settings.capacity_mode)
    # One wave per NUMA node id: two such pods on one worker at once compete for its allocatable cpus in
    # the scheduler, which may then refuse one for lack of cpu before its kubelet could judge it.
    for wave in sorted({node for _, node in bodies}):
        _run_wave({key: body for key, body in bodies.items() if key[1] == wave}, cluster, settings, results)
    failures = results.failures("exhaustion")
    assert not failures, describe_failures(failures)
