"""Case 5: after the agent (and so the kubelet) restarts, numa-align/numa-N is allocatable again
within 60 s and a new pinned pod succeeds.

"Again" means three things seen after the restart: numa-align registered with the new kubelet (its
numa_align_registrations_total, read on the node, grew by one per resource); the kubelet's device manager
holds the devices healthy (PodResources GetAllocatableResources, through `numa-align inspect`: the kubelet
fills it only from the plugin's ListAndWatch answers, and admits a pod only against it, else "no healthy
devices present"); and the new kubelet posted a Ready status that shows the devices. The Node's status is
not enough alone: the new kubelet's first status can carry the old counts, and once the counts are back to
what they were before the restart the kubelet posts no new status for minutes (nothing changed).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NoReturn

from kube import PodTrouble
from numa_align.devices import node_of_resource
from probe_pods import pinned_pod
from results import describe_failures

from numalab.inspect import parse_report
from numalab.placement.api_objects import numa_align_allocatable, ready_since
from numalab.placement.verdicts import judge_pinned

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


def kubelet_devices(report: Mapping[str, Any]) -> dict[int, int]:
    """{node: count} of the numa-align/numa-N devices the kubelet holds healthy, from `numa-align inspect`'s
    JSON report (its allocatable devices: PodResources GetAllocatableResources)."""
    devices = (report.get("allocatable") or {}).get("devices") or {}
    return {node: int(entry["count"]) for name, entry in devices.items()
            if (node := node_of_resource(name)) is not None}


def read_kubelet_devices(host, inspect_command: str) -> dict[int, int]:
    """kubelet_devices() on the node; empty while the kubelet's pod-resources socket does not answer."""
    command = f"{inspect_command} --format json"
    seen = host.run(command)
    return kubelet_devices(parse_report(host.backend.get_hostname(), command, seen.stdout)) if seen.rc == 0 else {}


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
    held: dict[int, int] = {}  # devices the new kubelet holds healthy
    registered = False
    while True:
        registered = registered or (read_registrations(host) or 0) >= before + len(nodes)
        if registered:
            held = read_kubelet_devices(host, settings.inspect_command)
        seen = cluster.node(worker)
        counts = numa_align_allocatable(seen["status"].get("allocatable") or {})
        back = (registered and ready_since(seen, node_clock)
                and all(counts.get(n, 0) > 0 and held.get(n, 0) > 0 for n in nodes))
        elapsed = time.monotonic() - started
        if back or elapsed > BACK_WITHIN:
            break
        time.sleep(1.0)
    shown = ", ".join(f"numa-{n}={counts.get(n, 0)} (kubelet holds {held.get(n, 0)})" for n in nodes)
    if not back:
        again = "registered again" if registered else "not registered again"
        fail(f"not allocatable {BACK_WITHIN:.0f}s after the restart ({again}): {shown}")
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
