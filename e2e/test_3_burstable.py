"""Case 3: a Burstable pod (fractional CPU) is not pinned: it sees the whole shared pool."""

from __future__ import annotations

from kube import PodTrouble
from numa_align.cpulist import parse_cpulist
from probe_pods import burstable_pod
from results import ALL_NODES, describe_failures

from numalab.placement.verdicts import judge_shared


def test_burstable_pod_runs_in_the_shared_pool(cluster, workers, settings, inspect_node, results):
    bodies = {w: burstable_pod(w, settings.probe_image) for w in workers}
    cluster.create_pods(bodies.values())
    try:
        for worker, body in bodies.items():
            name = body["metadata"]["name"]
            try:
                report = cluster.wait_for_probes(name, ["probe"])["probe"]
                shared = parse_cpulist(inspect_node(worker)["cpu_manager"]["shared_cpus"])
            except (PodTrouble, AssertionError) as exc:
                results.add(worker, ALL_NODES, "burstable", False, detail=str(exc))
                continue
            verdict = judge_shared(report, shared)
            problems = list(verdict.problems)
            qos = cluster.pod(name)["status"].get("qosClass")
            if qos != "Burstable":
                problems.append(f"qosClass {qos}, expected Burstable")
            results.add(worker, ALL_NODES, "burstable", not problems, verdict.cpus, verdict.mems, "; ".join(problems))
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("burstable")
    assert not failures, describe_failures(failures)
