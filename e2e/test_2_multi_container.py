"""Case 2: an anchoring init container, the app, and a Guaranteed sidecar without numa-align.

One wave per NUMA node id (every worker with that node at once), so a small worker only has to hold
one such pod at a time.
"""

from __future__ import annotations

from kube import PodTrouble
from probe_pods import multi_container_pod
from results import describe_failures

from numalab.placement.verdicts import judge_exclusive, judge_pinned, memory_not_enforced

CONTAINERS = 2  # app + sidecar hold exclusive CPUs; the init container's are reused by the app


def test_each_container_of_a_multi_container_pod(cluster, workers, settings, policies, pod_cpus, pinned_cpus,
                                                 results):
    for node in sorted({n for nodes in workers.values() for n in nodes}):
        needs = {w: CONTAINERS * pinned_cpus[w] for w in workers}  # whole cores under full-pcpus-only
        fits = {w for w, nodes in workers.items() if node in nodes and pod_cpus[w][node] >= needs[w]}
        for worker in sorted(w for w, nodes in workers.items() if node in nodes and w not in fits):
            results.add(worker, node, "multi", None, detail=f"node {node} has {pod_cpus[worker][node]} CPU(s) "
                        f"outside reserved-cpus; the pod needs {needs[worker]} on one node")
        bodies = {w: multi_container_pod(w, node, settings.probe_image, settings.capacity_mode, pinned_cpus[w])
                  for w in sorted(fits)}
        if not bodies:
            continue
        cluster.create_pods(bodies.values())
        try:
            for worker, body in bodies.items():
                name = body["metadata"]["name"]
                try:
                    probes = cluster.wait_for_probes(name, ["anchor", "app", "sidecar"])
                except PodTrouble as exc:
                    results.add(worker, node, "multi", False, detail=str(exc))
                    continue
                static = policies[worker]["memoryManagerPolicy"] == "Static"
                for container in ("anchor", "app"):
                    verdict = judge_pinned(probes[container], node, pinned_cpus[worker], memory_static=static)
                    note = memory_not_enforced(policies[worker]["memoryManagerPolicy"])
                    results.add(worker, node, f"multi:{container}", verdict.ok, verdict.cpus, verdict.mems,
                                "; ".join(verdict.problems) or note)
                verdict = judge_exclusive(probes["sidecar"], pinned_cpus[worker], disjoint_from=probes["app"].cpus)
                results.add(worker, node, "multi:sidecar", verdict.ok, verdict.cpus, verdict.mems,
                            "; ".join(verdict.problems))
        finally:
            cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("multi")
    assert not failures, describe_failures(failures)
