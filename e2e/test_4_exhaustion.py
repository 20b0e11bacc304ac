"""Case 4: a pod needing more CPUs than node N has free is refused (kubelet or scheduler, by mode)."""

from __future__ import annotations

from numa_align.cpulist import parse_cpulist
from probe_pods import exhaustion_pod
from results import describe_failures

from numalab.model.quantity import parse_cpu_millis
from numalab.placement import judge_exhaustion

OUTCOME_TIMEOUT = 120.0
"""Seconds for the kubelet to reject the pod (slot mode) or the scheduler to mark it unschedulable."""


def test_pod_larger_than_its_numa_node_is_refused(cluster, workers, settings, inspect_node, results):
    bodies = {}
    for worker, nodes in workers.items():
        try:
            allocatable = inspect_node(worker)["allocatable"]["cpus"]
        except AssertionError as exc:
            for node in nodes:
                results.add(worker, node, "exhaustion", False, detail=str(exc))
            continue
        worker_cpus = parse_cpu_millis(cluster.node(worker)["status"]["allocatable"]["cpu"]) // 1000
        for node in nodes:
            on_node = len(parse_cpulist(allocatable.get(str(node), "")))
            wanted = on_node + 1
            if wanted > worker_cpus:
                results.add(worker, node, "exhaustion", False,
                            detail=f"cannot build the case: node {node} has {on_node} allocatable cpus and the "
                                   f"worker only {worker_cpus}, so {wanted} would fail on the worker's total")
                continue
            bodies[(worker, node)] = exhaustion_pod(worker, node, wanted, settings.probe_image,
                                                    settings.capacity_mode)
    cluster.create_pods(bodies.values())
    try:
        for (worker, node), body in bodies.items():
            ok, why = cluster.wait_until(body["metadata"]["name"],
                                         lambda pod: judge_exhaustion(pod, settings.capacity_mode),
                                         timeout=OUTCOME_TIMEOUT)
            cpus = body["spec"]["containers"][0]["resources"]["limits"]["cpu"]
            results.add(worker, node, "exhaustion", ok, cpus=f"asked {cpus}", detail=why)
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("exhaustion")
    assert not failures, describe_failures(failures)
