"""What the fleet bench measures, from recorded figures: throughput, bind latencies, packing and stranded CPUs,
NodeResourceTopology writes from /metrics text, RSS from /proc, when a fleet is full, and the pod estimate."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from numalab.fleet import measures
from numalab.fleet.filling import Side, estimate_pods, pod_millicpu
from numalab.fleet.kubelet_sim import SimulatedKubelet
from numalab.fleet.measures import FILLING, FULL, MORE, NUDGE, fullness
from numalab.fleet.watching import PodLog
from numalab.fleet.workload import Mix, workload
from tests.fleet.pods import guaranteed, node


def test_throughput_counts_the_burst_up_to_its_95th_percentile_bind():
    start = 100.0
    binds = [start + 0.1 * i for i in range(1, 101)]  # 10 a second for 10 s
    assert measures.bind_throughput(start, binds) == pytest.approx(95 / 9.5)
    tail = [start + 60.0] * 5  # pods that fit only after a retry, a minute later
    assert measures.bind_throughput(start, binds + tail) == pytest.approx(100 / 10.0)
    assert measures.bind_throughput(start, [start - 1.0, *binds]) == pytest.approx(95 / 9.5)  # before: not counted
    assert measures.bind_throughput(start, []) is None


def test_bind_latency_percentiles_are_nearest_rank():
    latencies = [0.1] * 98 + [1.0, 5.0]
    assert measures.latency_percentiles(latencies) == (0.1, 1.0)
    assert measures.latency_percentiles([0.3, 0.2]) == (0.2, 0.3)
    assert measures.latency_percentiles([]) is None


def test_packing_and_stranded_cpus_by_the_auditors_definition():
    """A 2cell-16 node (cells of 7 and 8 allocatable CPUs) holding a 5-CPU pod in each cell has 2 + 3 free, 2 of
    them outside its largest free cell; an empty one strands 7 of 15 (the most free in one cell is 8)."""
    full, empty = SimulatedKubelet(node("2cell-16", "a", 0)), SimulatedKubelet(node("2cell-16", "b", 1))
    for name in ("p", "q"):
        assert full.admit(guaranteed(name, cpu="5", memory="5Gi", on="a")).verdict == "admitted"
    assert full.stranded_cpus() == 2 and empty.stranded_cpus() == 7
    packed = measures.packing([full, empty])
    assert packed == measures.Packing(allocated_millicpu=10_000, allocatable_millicpu=30_000, stranded_cpus=9,
                                      nodes=2, stranding_nodes=2)
    assert packed.allocated_share == pytest.approx(1 / 3)
    full.release("default", "p")
    assert full.stranded_cpus() == 3  # 7 + 3 free: the 3 stranded now
    assert measures.packing([]).allocated_share == 0.0


METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, ...
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="topology.node.k8s.io",resource="noderesourcetopologies",scope="cluster",subresource="",verb="CREATE",version="v1alpha2"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="topology.node.k8s.io",resource="noderesourcetopologies",scope="cluster",subresource="",verb="PATCH",version="v1alpha2"} 2500
apiserver_request_total{code="404",component="apiserver",dry_run="",group="topology.node.k8s.io",resource="noderesourcetopologies",scope="cluster",subresource="",verb="PATCH",version="v1alpha2"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="topology.node.k8s.io",resource="noderesourcetopologies",scope="cluster",subresource="",verb="UPDATE",version="v1alpha2"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="topology.node.k8s.io",resource="noderesourcetopologies",scope="cluster",subresource="",verb="LIST",version="v1alpha2"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 9000
apiserver_request_total_other{resource="noderesourcetopologies",verb="PATCH"} 5
apiserver_request_duration_seconds_bucket{resource="noderesourcetopologies",verb="PATCH",le="0.1"} 77
"""  # noqa: E501


def test_nrt_writes_sum_creates_updates_and_patches_of_the_objects_whatever_the_answer():
    assert measures.nrt_writes(METRICS) == 100 + 2500 + 3 + 7
    later = METRICS.replace("} 2500", "} 3100")
    assert measures.nrt_writes(later) - measures.nrt_writes(METRICS) == 600
    assert measures.nrt_writes("") == 0
    assert measures.nrt_writes(METRICS, measures.READ_VERBS) == 40


def test_rss_from_proc_status(tmp_path):
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text("Name:\tkube-scheduler\nVmPeak:\t 9000 kB\nVmRSS:\t   81920 kB\n")
    assert measures.rss_bytes(42, tmp_path) == 81920 * 1024
    (tmp_path / "43").mkdir()
    (tmp_path / "43" / "status").write_text("Name:\tkthreadd\n")
    assert measures.rss_bytes(43, tmp_path) is None
    assert measures.rss_bytes(44, tmp_path) is None
    assert measures.rss_bytes(os.getpid()) > 1024 * 1024


@pytest.mark.parametrize(("now", "activity", "nudge", "left_over", "expected"), [
    (105.0, 100.0, 0.0, 3, FILLING),  # a pod admitted or created 5 s ago
    (111.0, 100.0, 0.0, 3, NUDGE),  # quiet for 10 s: have the turned-away pods tried again first
    (115.0, 100.0, 111.0, 3, FILLING),  # nudged 4 s ago
    (121.5, 100.0, 111.0, 3, FULL),  # quiet 10 s after the nudge, pods left over
    (121.5, 100.0, 111.0, 0, MORE),  # every pod offered was placed
    (125.0, 112.0, 111.0, 3, NUDGE),  # admitted after the nudge: quiet again, nudge again
])
def test_fullness(now, activity, nudge, left_over, expected):
    assert fullness(now, activity, nudge, 10.0, left_over=left_over) == expected


@pytest.mark.parametrize(("left_over", "owed", "expected"), [
    (3, 1_707, FILLING),  # quiet long after the nudge, but ReplicaSets still owe pods (5,000 nodes, default side)
    (0, 1, FILLING),
    (3, 0, FULL),
    (0, 0, MORE),
])
def test_a_fleet_is_not_full_while_replicasets_owe_pods(left_over, owed, expected):
    assert fullness(500.0, 100.0, 111.0, 10.0, left_over=left_over, owed=owed) == expected


def test_the_replicas_owed_are_those_no_pod_was_seen_for():
    log = PodLog()
    side = SimpleNamespace(log=log, offered=0, replicas={}, refused=set())
    deployment = {"kind": "Deployment", "metadata": {"name": "d1"}, "spec": {"replicas": 3}}
    Side._offered(side, [deployment, {"kind": "Deployment", "metadata": {"name": "d2"}, "spec": {"replicas": 2}},
                         {"kind": "Pod", "metadata": {"name": "p"}}])
    assert side.offered == 6 and side.replicas == {"d1": 3, "d2": 2}
    assert Side.owed(side) == 5
    for n in range(4):  # d1's three and one remade after a rejection; d2 none yet
        log.observe("ADDED", {"metadata": {"uid": f"u{n}", "labels": {"app": "d1"}}, "spec": {}, "status": {}})
    log.observe("ADDED", {"metadata": {"uid": "p", "labels": {}}, "spec": {}, "status": {}})
    assert Side.owed(side) == 2
    side.refused.add("d2")  # the API refused it: nothing owes its pods
    assert Side.owed(side) == 0


def test_pods_to_fill_and_the_estimate_every_side_shares():
    assert measures.pods_to_fill(3500, [1000] * 10) == 4
    assert measures.pods_to_fill(3500, [1000] * 2) == 2  # the stream ran out
    assert measures.pods_to_fill(10**9, iter(lambda: 500, None), sample=100) == 2_000_000  # extrapolated
    assert measures.pods_to_fill(10**9, iter(lambda: 0, None), sample=100) == 100
    deployment = next(obj for obj in workload("x", 1) if obj["kind"] == "Deployment")
    cpus = pod_millicpu(deployment)
    assert len(cpus) == deployment["spec"]["replicas"] and cpus[0] >= 1000
    mix = Mix(kinds={"guaranteed": 1}, cpus={4: 1})
    assert estimate_pods(16_000, seed=1, mix=mix) == 4 == estimate_pods(15_000, seed=9, mix=mix)
