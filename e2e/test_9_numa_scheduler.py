"""Case 9: the default scheduler and the NUMA-aware one side by side (side_by_side.py: the set-up;
side_by_side_waits.py: the waits).

Rows: `numa-scheduler:default-scheduler` (the baseline, pass: at least one pod it bound where no cell fits
was rejected by the kubelet with TopologyAffinityError; without one the comparison proves nothing),
`numa-scheduler:numa-aware` (pass: no rejection, every pod that fits Running, the rest Pending with the
plugin's reason) and `numa-scheduler:deployment` (the same pods as one NUMA-aware Deployment: no rejection
loop, no pod made beyond its replicas). Needs the NUMA-aware
scheduler running (the lab's `numa_scheduler`); its absence is a failure that says so.
"""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException
from nrt import read_nrt
from probe_pods import dns_label, pinned_pod
from results import ALL_NODES, describe_failures
from side_by_side import (
    CASE,
    DEFAULT,
    NUMA_AWARE,
    contender_deployment,
    contender_pod,
    judge_default,
    judge_deployment,
    judge_numa_aware,
)
from side_by_side_waits import run_deployment, run_side, wait_fitting, wait_resyncable

LEASE = ("kube-system", "numa-scheduler")


def _cell_cpus(nrt: dict) -> dict[int, int]:
    return {int(zone["name"].removeprefix("node-")): int(r["allocatable"])
            for zone in nrt.get("zones") or [] for r in zone.get("resources") or [] if r["name"] == "cpu"}


def test_numa_aware_scheduler_places_by_cell_where_the_default_one_gets_rejections(
        cluster, workers, pinned_cpus, settings, results):
    try:
        client.CoordinationV1Api(cluster.api).read_namespaced_lease(LEASE[1], LEASE[0])
    except ApiException as exc:
        results.add(ALL_NODES, ALL_NODES, f"{CASE}:{NUMA_AWARE}", False,
                    detail=f"no NUMA-aware scheduler (Lease {'/'.join(LEASE)}: {exc.status}); deploy with "
                           "numa_scheduler on, or leave this case out with -k 'not numa_aware'")
        raise AssertionError(describe_failures(results.failures(CASE))) from None
    # Pressure: on each worker a pinned pod takes CPUs of its largest cell, splitting what is left.
    cpus = max(2, *pinned_cpus.values())
    pressure, expected = [], 0
    for worker in workers:
        cells = _cell_cpus(read_nrt(cluster.api, worker) or {})
        largest = max(cells, key=lambda node: (cells[node], -node))
        pressure.append(pinned_pod(worker, largest, settings.probe_image, settings.capacity_mode,
                                   cpus=pinned_cpus[worker]))
        cells[largest] -= pinned_cpus[worker]
        expected += sum(free // cpus for free in cells.values())  # contenders that fit, each in one cell

    def objects() -> list[dict]:
        return [read_nrt(cluster.api, worker) or {} for worker in workers]

    contenders = expected + 2
    names = cluster.create_pods(pressure)
    sides = {}
    unsynced_before: dict[str, str] = {}

    def fitting(row: str) -> None:
        published = wait_fitting(objects, cpus, expected)  # the pressure in, the last run's pods out
        if published != expected:
            results.add(ALL_NODES, ALL_NODES, f"{CASE}:{row}", False,
                        detail=f"the NRT objects show {published} fits for {cpus} CPUs, expected {expected}")
            raise AssertionError(describe_failures(results.failures(CASE)))
        if row == DEFAULT:
            return
        # The last side's pods left nodes marked for resync: start when the scheduler can trust every object.
        stale = wait_resyncable(objects, lambda: cluster.bound_pods(workers))
        if stale:  # go on: the verdict waits for the scheduler's own retry, and this says why it had to
            unsynced_before[row] = (f"; the NRT objects of {', '.join(stale)} had a pod fingerprint other than "
                                    "their bound, unfinished pods' for 60 s before it started")

    try:
        for name in names:
            cluster.wait_for_probes(name, ["probe"])
        for scheduler in (DEFAULT, NUMA_AWARE):
            fitting(scheduler)
            bodies = [contender_pod(dns_label("contend", scheduler[:7], str(i)), settings.probe_image, cpus,
                                    scheduler, workers) for i in range(contenders)]
            sides[scheduler] = run_side(cluster, scheduler, bodies, expected)
        fitting("deployment")
        deployment = run_deployment(cluster, contender_deployment(
            dns_label("contend", "deploy"), settings.probe_image, cpus, NUMA_AWARE, workers, contenders), expected)
    finally:
        cluster.delete_pods(names)
    setup = f"{contenders} pods of {cpus} CPUs, {expected} fit in one cell each: "
    problems = judge_default(sides[DEFAULT])  # the baseline: without its rejections the comparison shows nothing
    results.add(ALL_NODES, ALL_NODES, f"{CASE}:{DEFAULT}", not problems,
                detail=setup + sides[DEFAULT].summary() + ("; " + "; ".join(problems) if problems else ""))
    problems = judge_numa_aware(sides[NUMA_AWARE], expected)
    results.add(ALL_NODES, ALL_NODES, f"{CASE}:{NUMA_AWARE}", not problems,
                detail=setup + sides[NUMA_AWARE].summary() + ("; " + "; ".join(problems) if problems else "")
                + unsynced_before.get(NUMA_AWARE, ""))
    problems = judge_deployment(deployment, expected)
    results.add(ALL_NODES, ALL_NODES, f"{CASE}:deployment", not problems,
                detail=setup + deployment.summary() + ("; " + "; ".join(problems) if problems else "")
                + unsynced_before.get("deployment", ""))
    failures = results.failures(CASE)
    assert not failures, describe_failures(failures)
