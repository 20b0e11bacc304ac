"""The simulated kubelet: explain's verdicts, what it allocates, the statuses it writes and the object numa-align
would publish after."""

import json

from numalab.explain.requests import pod_request
from numalab.explain.verdicts import explain
from numalab.fleet.kubelet_sim import SimulatedKubelet, take_cpus
from numalab.fleet.spec import resolve_shape
from numalab.top.nrt import parse_nrt
from tests.fleet.pods import burstable, container, guaranteed, node, pod, running

TAE = "TopologyAffinityError: Resources cannot be allocated with Topology locality"
NOW = "2026-01-02T03:04:05Z"


def kubelet(shape="2cell-16", **settings):
    return SimulatedKubelet(node(shape, **settings), "uid-1", clock=lambda: NOW)


def available(k, resource="cpu"):
    return [c.available.get(resource, 0) for c in k.state().cells]


def fingerprint(k):
    return parse_nrt(k.nrt).attributes["nodeTopologyPodsFingerprint"]


def test_two_cpu_pod_admitted_on_one_cell_running_status_and_new_object():
    k = kubelet()
    empty = fingerprint(k)
    decision = k.admit(guaranteed("a"))
    assert (decision.verdict, dict(decision.cells)) == ("admitted", {"cpu": [0], "memory": [0]})
    assert decision.nrt is k.nrt and fingerprint(k) != empty
    assert available(k) == [5, 8]
    assert k.pods[("default", "a")].cpus == {1, 2}  # CPU 0 is reserved
    status = decision.status_patch["status"]
    assert status["phase"] == "Running" and status["hostIP"] == "172.16.0.0" and status["startTime"] == NOW
    assert [c["type"] for c in status["conditions"]] == ["PodReadyToStartContainers", "Initialized", "Ready",
                                                         "ContainersReady"]
    assert status["containerStatuses"][0]["state"] == {"running": {"startedAt": NOW}}
    allocations = json.loads(k.nrt["metadata"]["annotations"]["numa-align/allocations"])
    assert allocations == {"default/a": {"cpus": "1-2", "devices": {}, "memory": {"0": 2**30}, "numa_nodes": [0]}}


def test_pod_that_fits_only_split_is_rejected_as_the_kubelet_does_and_freed_room_admits_it():
    k = kubelet()
    assert k.admit(guaranteed("six-a", cpu="6")).cells["cpu"] == [0]  # 7 allocatable: 1 left
    assert k.admit(guaranteed("six-b", cpu="6")).cells["cpu"] == [1]  # 8: 2 left
    before = k.nrt
    rejected = k.admit(guaranteed("three", cpu="3"))
    assert (rejected.verdict, rejected.reason, rejected.nrt) == ("rejected", TAE, None)
    assert rejected.status_patch == {"status": {
        "phase": "Failed", "reason": "TopologyAffinityError",
        "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}}
    assert k.nrt is before and ("default", "three") not in k.pods
    held = fingerprint(k)
    after = k.release("default", "six-a")
    assert after is k.nrt and fingerprint(k) != held and available(k) == [7, 2]
    assert k.release("default", "six-a") is None
    again = k.admit(guaranteed("three-again", cpu="3"))
    assert again.verdict == "admitted" and again.cells["cpu"] == [0]


def test_a_pod_already_held_is_not_judged_twice():
    k = kubelet()
    k.admit(guaranteed("a"))
    again = k.admit(guaranteed("a"))
    assert (again.verdict, again.status_patch, again.nrt) == ("admitted", None, None)
    assert available(k) == [5, 8]


def test_full_pcpus_only_rejects_an_odd_cpu_count_with_smt_alignment_error():
    k = kubelet("2cell-smt-full-32")
    decision = k.admit(guaranteed("odd", cpu="3"))
    assert decision.verdict == "rejected"
    assert decision.status_patch["status"]["reason"] == "SMTAlignmentError"
    assert decision.status_patch["status"]["message"] == ("Pod was rejected: SMT Alignment Error: requested 3 cpus "
                                                           "not multiple cpus per core = 2")
    whole = k.admit(guaranteed("even", cpu="4"))
    assert whole.verdict == "admitted" and k.pods[("default", "even")].cpus == {2, 3, 4, 5}
    cells = k.state().cells
    assert (cells[0].free_cores, cells[0].physical_cpus) == (5, 10)


def test_whole_cores_first_then_threads_of_the_fullest_cores():
    host = resolve_shape("2cell-smt-32").host
    free = set(range(2, 16)) - {4}  # core {4,5} half held
    assert take_cpus(host, free, 0, 2) == {2, 3}
    assert take_cpus(host, free, 0, 3) == {2, 3, 5}
    assert take_cpus(host, free, 1, 2) == set()


def test_restricted_prefer_closest_takes_the_closest_pair_as_explain_does():
    """Cell 0 full: a 20-CPU, 20Gi pod needs two cells; {1,2} is the lowest pair, {2,3} (distance 11) the closest."""
    k = kubelet("4cell-closest-64")
    fill = guaranteed("fill", cpu="14", memory="2Gi")
    assert k.admit(fill).cells["cpu"] == [0]
    wide = guaranteed("wide", cpu="20", memory="20Gi")
    (verdict,) = explain(pod_request(wide, "wide"), [k.nrt], [k.node_object], [running(fill)])
    decision = k.admit(wide)
    assert decision.verdict == verdict.verdict == "admitted"
    assert dict(decision.cells) == verdict.cells == {"cpu": [2, 3], "memory": [2, 3]}
    assert len(k.pods[("default", "wide")].cpus & set(range(32, 48))) == 16
    lowest = kubelet("4cell-closest-64", topology_manager_policy_options={})
    lowest.admit(guaranteed("fill", cpu="14", memory="2Gi"))
    assert lowest.admit(wide).cells["cpu"] == [1, 2]


def test_burstable_pods_count_against_allocatable_only():
    k = kubelet()
    for i in range(30):
        assert k.admit(burstable(f"b{i}")).verdict == "admitted"
    assert available(k) == [7, 8] and k.pods[("default", "b0")].cpus == frozenset()
    assert k.used["cpu"] == 15_000 and k.used["pods"] == 30
    full = k.admit(burstable("one-more"))
    assert full.verdict == "rejected" and full.reason.startswith("OutOfcpu: Node didn't have enough resource: cpu")
    assert k.admit(guaranteed("pinned", cpu="1")).reason.startswith("OutOfcpu")
    k.release("default", "b0")
    k.release("default", "b1")
    assert k.admit(guaranteed("pinned-2", cpu="1")).verdict == "admitted"


def test_hugepages_and_devices_are_taken_on_the_pods_cell():
    k = kubelet()
    decision = k.admit(guaranteed("h", cpu="2", extra={"hugepages-2Mi": "512Mi", "numa-align/numa-1": "1"}))
    assert dict(decision.cells) == {"numa-align/numa-1": [1], "cpu": [1], "memory": [1], "hugepages-2Mi": [1]}
    assert available(k, "hugepages-2Mi") == [2**30, 2**29]
    assert available(k, "numa-align/numa-1") == [0, 99]
    assert k.pods[("default", "h")].devices == {1: ("numa-1-0",)}
    k.release("default", "h")
    assert available(k, "numa-align/numa-1") == [0, 100] and len(k.free_devices[1]) == 100


def test_memory_only_cell_never_takes_a_pinned_pods_memory():
    k = kubelet("3cell-memonly-24")
    decision = k.admit(guaranteed("m", cpu="4", memory="22Gi"))
    assert dict(decision.cells) == {"cpu": [1], "memory": [1]}  # cell 0 lost 1124Mi to reserved-memory
    assert k.admit(guaranteed("n", cpu="4", memory="22Gi")).reason == TAE  # the CXL cell would hold it, no CPUs


def test_what_the_engine_cannot_judge_is_said_and_not_written():
    k = kubelet()
    unknown = k.admit(pod("gpu", container(cpu="1", memory="1Gi", extra={"example.com/gpu": "1"})))
    assert unknown.verdict == "cannot-judge" and "unknown resource(s) example.com/gpu" in unknown.reason
    assert (unknown.status_patch, unknown.nrt) == (None, None)
    broken = k.admit({"metadata": {"name": "x"}, "spec": {"containers": []}})
    assert broken.verdict == "cannot-judge" and "spec.containers is empty" in broken.reason


def test_init_containers_are_listed_as_completed():
    init = container(name="setup", cpu="1", memory="1Gi")
    decision = kubelet().admit(pod("i", container(), init=(init,)))
    status = decision.status_patch["status"]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert decision.cells["cpu"] == [0]
