"""Case 2: an anchoring init container, the app, and a Guaranteed sidecar without numa-align.

One wave per NUMA node id (every worker with that node at once), so a small worker only has to hold
one such pod at a time.
"""

from __future__ import annotations

from kube import PodTrouble
from probe_pods import multi_container_pod
from results import describe_failures

from numalab.placement import judge_exclusive, judge_pinned


def test_each_container_of_a_multi_container_pod(cluster, workers, settings, policies, results):
    for node in sorted({n for nodes in workers.values() for n in nodes}):
        bodies = {w: multi_container_pod(w, node, settings.probe_image, settings.capacity_mode)
                  for w, nodes in workers.items() if node in nodes}
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
                    verdict = judge_pinned(probes[container], node, 1, memory_static=static)
                    results.add(worker, node, f"multi:{container}", verdict.ok, verdict.cpus, verdict.mems,
                                "; ".join(verdict.problems))
                verdict = judge_exclusive(probes["sidecar"], 1, disjoint_from=probes["app"].cpus)
                results.add(worker, node, "multi:sidecar", verdict.ok, verdict.cpus, verdict.mems,
                            "; ".join(verdict.problems))
        finally:
            cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("multi")
    assert not failures, describe_failures(failures)
