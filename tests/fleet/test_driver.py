"""The driver against an in-memory API: registration, each bound pod answered once, objects before statuses, one
object write per node per batch, deletions finished, relists and failed writes recovered."""

import threading
import time

import pytest

from numalab.fleet.driver import FleetDriver
from numalab.fleet.spec import expand, fleet_spec
from numalab.top.nrt import parse_nrt
from tests.fleet.fakeapi import FakeFleetApi
from tests.fleet.pods import container, guaranteed, pod

FLEET = expand(fleet_spec({"nodes": 4, "shapes": [{"shape": "2cell-16", "count": 2},
                                                   {"shape": "2cell-smt-32", "count": 2}], "seed": 0}))
PLAIN = [d.name for d in FLEET if d.shape.name == "2cell-16"]
SMT = [d.name for d in FLEET if d.shape.name == "2cell-smt-32"]


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def running():
    """Start a driver over a fake API; yields (api, driver); stops it after the test."""
    started = []

    def start(workers=2, api=None, before=()):
        api = api or FakeFleetApi()
        driver = FleetDriver(api, FLEET, workers=workers, clock=lambda: "2026-01-01T00:00:00Z")
        driver.register()
        for item in before:
            api.bind(item, quietly=True)
        stop, ready = threading.Event(), threading.Event()
        thread = threading.Thread(target=driver.run, args=(stop, ready))
        thread.start()
        started.append((stop, thread))
        assert ready.wait(5)
        return api, driver

    yield start
    for stop, thread in started:
        stop.set()
        thread.join(5)
        assert not thread.is_alive()


def fingerprint(api, node):
    return parse_nrt(api.nrts[node]).attributes["nodeTopologyPodsFingerprint"]


def test_register_creates_kwok_nodes_and_their_objects_owned_by_them():
    api = FakeFleetApi()
    driver = FleetDriver(api, FLEET, workers=3)
    driver.register()
    assert sorted(api.nodes) == [d.name for d in FLEET]
    assert all(n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake" for n in api.nodes.values())
    for name, obj in api.nrts.items():
        assert obj["metadata"]["ownerReferences"][0]["uid"] == f"uid-{name}"
    assert driver.counts.snapshot()["writes"] == {"node": 4, "nrt": 4}
    FleetDriver(api, FLEET).register()  # a second run finds them: same uids
    assert {k.uid for k in driver.kubelets.values()} == {f"uid-{d.name}" for d in FLEET}


def test_each_bound_pod_is_answered_once_with_counts_per_scheduler(running):
    api, driver = running()
    node = PLAIN[0]
    before = fingerprint(api, node)
    api.bind(guaranteed("a", cpu="6", on=node))
    api.bind(guaranteed("b", cpu="6", on=node))
    api.bind({**guaranteed("c", cpu="3", on=node), "spec": {**guaranteed("c", cpu="3", on=node)["spec"],
                                                          "schedulerName": "default-scheduler"}})
    wait_for(lambda: all(api.pods[("default", n)]["status"]["phase"] != "Pending" for n in "abc"))
    assert api.pods[("default", "a")]["status"]["phase"] == "Running"
    assert api.pods[("default", "c")]["status"]["reason"] == "TopologyAffinityError"
    wait_for(lambda: fingerprint(api, node) != before)
    time.sleep(0.2)  # the status patches came back as MODIFIED events: none judged again
    assert [w for w in api.writes if w[0] == "status"] == [("status", "default/a"), ("status", "default/b"),
                                                           ("status", "default/c")]
    decisions = driver.counts.snapshot()["decisions"]
    assert decisions["numa-aware"] == {"admitted": 2, "rejected": {}, "cannot-judge": {}}
    assert decisions["default-scheduler"]["rejected"] == {"TopologyAffinityError": 1}
    zones = {z["name"]: z for z in api.nrts[node]["zones"]}
    cpu = next(r for r in zones["node-0"]["resources"] if r["name"] == "cpu")
    assert cpu["available"] == "1"


def test_changes_to_one_node_queued_together_make_one_object_write(running):
    api = FakeFleetApi()
    api.gate = gate = threading.Event()
    api, driver = running(workers=1, api=api)
    node = PLAIN[1]
    api.bind(guaranteed("first", cpu="1", on=node))
    wait_for(lambda: api.gate is None)  # the worker waits in the first status patch
    for name in ("x", "y", "z"):
        api.bind(guaranteed(name, cpu="1", on=node))
    wait_for(lambda: driver._queues[0].qsize() == 3)
    gate.set()
    wait_for(lambda: len([w for w in api.writes if w[0] == "status"]) == 4)
    wait_for(lambda: len([w for w in api.writes if w[0] == "nrt"]) == 2)
    time.sleep(0.2)
    kinds = [w[0] for w in api.writes]
    assert kinds == ["nrt", "status", "nrt", "status", "status", "status"]  # the object before the statuses


def test_deletion_is_finished_and_frees_the_cells(running):
    api, driver = running()
    node = SMT[0]
    api.bind(guaranteed("a", cpu="4", on=node))
    wait_for(lambda: api.pods[("default", "a")]["status"]["phase"] == "Running")
    held = fingerprint(api, node)
    api.mark_deleted("default", "a")
    wait_for(lambda: ("default", "a") not in api.pods)
    wait_for(lambda: fingerprint(api, node) != held)
    assert not driver.kubelets[node].pods
    assert driver.counts.snapshot()["writes"]["delete"] == 1


def test_holding_and_idle_say_when_the_fleet_is_empty_and_its_objects_written(running):
    api, driver = running()
    node = PLAIN[0]
    wait_for(driver.idle)  # the first list's entries judged
    assert driver.holding() == 0
    api.bind(guaranteed("a", cpu="2", on=node))
    wait_for(lambda: driver.holding() == 1 and driver.idle())
    assert ("nrt", node) in api.writes
    api.failing_nrt_writes = 2  # the write after the release, and its retry with the DELETED event
    api.mark_deleted("default", "a")
    wait_for(lambda: driver.holding() == 0)
    assert not driver.idle()  # its object not written yet: tried again within a second
    wait_for(driver.idle)
    assert api.writes[-1] == ("nrt", node)


def test_a_relist_after_an_expired_watch_releases_the_gone_and_admits_the_new(running):
    node = SMT[1]
    api, driver = running(before=[guaranteed("old", cpu="2", on=node)])
    wait_for(lambda: api.pods[("default", "old")]["status"]["phase"] == "Running")
    api.forget("default", "old")
    api.bind(guaranteed("new", cpu="2", on=node), quietly=True)
    api.events.put("expire")
    wait_for(lambda: api.pods[("default", "new")]["status"].get("phase") == "Running")
    wait_for(lambda: set(driver.kubelets[node].pods) == {("default", "new")})


def test_a_failed_object_write_is_tried_again(running):
    api = FakeFleetApi()
    api, driver = running(api=api)
    api.failing_nrt_writes = 1
    node = PLAIN[0]
    api.bind(guaranteed("a", cpu="2", on=node))
    wait_for(lambda: ("nrt", node) in api.writes)
    assert driver.counts.snapshot()["writes"]["nrt-error"] == 1


def test_pods_on_other_nodes_and_unjudgeable_pods_are_left_alone(running):
    api, driver = running()
    api.bind(guaranteed("elsewhere", on="real-node"))
    api.bind(pod("gpu", container(extra={"example.com/gpu": "1"}), on=FLEET[0].name))
    wait_for(lambda: driver.counts.snapshot()["decisions"].get("numa-aware", {}).get("cannot-judge"))
    assert api.pods[("default", "elsewhere")]["status"]["phase"] == "Pending"
    assert api.pods[("default", "gpu")]["status"]["phase"] == "Pending"
    assert not [w for w in api.writes if w[0] == "status"]
