"""Case 5: after the agent (and so the kubelet) restarts, numa-align/numa-N is allocatable again
within 60 s and a new pinned pod succeeds."""

from __future__ import annotations

import time

from kube import PodTrouble
from probe_pods import pinned_pod
from results import describe_failures

from numalab.placement import judge_pinned, numa_align_allocatable, ready_since

BACK_WITHIN = 60.0
"""Seconds from the restart until every numa-align/numa-N of the worker is allocatable again."""


def agent_service(host, asked: str) -> str:
    """The unit that runs the kubelet: as asked, or for `auto` kubelet (upstream) when it exists, else rke2-agent."""
    if asked != "auto":
        return asked
    return "kubelet" if host.run("systemctl cat kubelet.service").rc == 0 else "rke2-agent"


def test_numa_align_survives_a_kubelet_restart(cluster, workers, hosts, settings, policies, results):
    worker = settings.restart_worker or next(iter(workers))
    assert worker in workers, f"--restart-worker {worker} is not a worker with numa-align ({', '.join(workers)})"
    nodes = workers[worker]
    host = hosts[worker]
    node_clock = int(host.check_output("date +%s"))
    started = time.monotonic()
    service = agent_service(host, settings.agent_service)
    restart = host.run(f"systemctl restart {service}")
    if restart.rc != 0:
        why = f"systemctl restart {service} exited {restart.rc}: {restart.stderr.strip()}"
        for n in nodes:
            results.add(worker, n, "restart", False, detail=why)
        raise AssertionError(describe_failures(results.failures("restart")))
    counts: dict[int, int] = {}
    while True:
        seen = cluster.node(worker)
        counts = numa_align_allocatable(seen["status"].get("allocatable") or {})
        back = ready_since(seen, node_clock) and all(counts.get(n, 0) > 0 for n in nodes)
        elapsed = time.monotonic() - started
        if back or elapsed > BACK_WITHIN:
            break
        time.sleep(1.0)
    shown = ", ".join(f"numa-{n}={counts.get(n, 0)}" for n in nodes)
    if not back:
        why = f"not allocatable {BACK_WITHIN:.0f}s after the restart: {shown}"
        for n in nodes:
            results.add(worker, n, "restart", False, detail=why)
        raise AssertionError(describe_failures(results.failures("restart")))
    for n in nodes:
        results.add(worker, n, "restart", True, detail=f"allocatable again after {elapsed:.1f}s ({shown})")

    bodies = {n: pinned_pod(worker, n, settings.probe_image, settings.capacity_mode) for n in nodes}
    for body in bodies.values():
        body["metadata"]["name"] = body["metadata"]["name"].replace("pin-", "restart-", 1)
    cluster.create_pods(bodies.values())
    try:
        static = policies[worker]["memoryManagerPolicy"] == "Static"
        for n, body in bodies.items():
            try:
                report = cluster.wait_for_probes(body["metadata"]["name"], ["probe"])["probe"]
            except PodTrouble as exc:
                results.add(worker, n, "restart:pinned", False, detail=str(exc))
                continue
            verdict = judge_pinned(report, n, 1, memory_static=static)
            results.add(worker, n, "restart:pinned", verdict.ok, verdict.cpus, verdict.mems,
                        "; ".join(verdict.problems))
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())
    failures = results.failures("restart")
    assert not failures, describe_failures(failures)
