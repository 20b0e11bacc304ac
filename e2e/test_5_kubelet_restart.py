"""Case 5: after the agent (and so the kubelet) restarts, numa-align/numa-N is allocatable again
within 60 s and a new pinned pod succeeds.

"Again" means after numa-align registered with the new kubelet (its numa_align_registrations_total, read on
the node, grew by one per resource) and a node status posted after that shows the devices: the status the
new kubelet posts first can still carry the old counts while the device manager, restored from its
checkpoint, holds the devices unhealthy; a pod admitted then is rejected ("no healthy devices present")."""

from __future__ import annotations

import time
from typing import NoReturn

from kube import PodTrouble
from probe_pods import pinned_pod
from results import describe_failures

from numalab.placement import judge_pinned, numa_align_allocatable, ready_since

BACK_WITHIN = 60.0
"""Seconds from the restart until every numa-align/numa-N of the worker is allocatable again."""
METRICS = "curl -sf http://127.0.0.1:9201/metrics"
"""numa-align's /metrics on the node (its unit's default NUMA_METRICS_ADDR, :9201)."""
REGISTRATIONS = "numa_align_registrations_total"


def registrations(metrics_text: str) -> int | None:
    """numa-align's successful Register calls from its /metrics text; None when the counter is absent."""
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name == REGISTRATIONS:
            return int(float(value))
    return None


def read_registrations(host) -> int | None:
    seen = host.run(METRICS)
    return registrations(seen.stdout) if seen.rc == 0 else None


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

    def fail(why: str) -> NoReturn:
        for n in nodes:
            results.add(worker, n, "restart", False, detail=why)
        raise AssertionError(describe_failures(results.failures("restart")))

    before = read_registrations(host)
    if before is None:
        fail(f"cannot read {REGISTRATIONS} on the node ({METRICS})")
    node_clock = int(host.check_output("date +%s"))
    started = time.monotonic()
    service = agent_service(host, settings.agent_service)
    restart = host.run(f"systemctl restart {service}")
    if restart.rc != 0:
        fail(f"systemctl restart {service} exited {restart.rc}: {restart.stderr.strip()}")
    counts: dict[int, int] = {}
    registered_at: int | None = None  # node clock once numa-align registered with the new kubelet
    while True:
        if registered_at is None and (read_registrations(host) or 0) >= before + len(nodes):
            registered_at = int(host.check_output("date +%s"))
        seen = cluster.node(worker)
        counts = numa_align_allocatable(seen["status"].get("allocatable") or {})
        back = (registered_at is not None and ready_since(seen, max(node_clock, registered_at))
                and all(counts.get(n, 0) > 0 for n in nodes))
        elapsed = time.monotonic() - started
        if back or elapsed > BACK_WITHIN:
            break
        time.sleep(1.0)
    shown = ", ".join(f"numa-{n}={counts.get(n, 0)}" for n in nodes)
    if not back:
        registered = "registered again" if registered_at is not None else "not registered again"
        fail(f"not allocatable {BACK_WITHIN:.0f}s after the restart ({registered}): {shown}")
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
