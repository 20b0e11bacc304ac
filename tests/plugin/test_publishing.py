"""NrtPublisher against the PodResources double on a unix socket and the fake API server: the object
created from sysfs and PodResources, written only on change (at most once a second), never rewritten while
idle but repaired when deleted or edited, and each failure (CRD missing, socket absent, Node gone,
forbidden, conflict) logged once and recovered from. Time is a fake clock; tests call poll_once()
themselves, except the one that runs the thread. test_liveness.py has the Lease, the backoff and the pods
the fingerprint covers."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest
from numa_align.fingerprint import pod_fingerprint
from numa_align.kubeapi import KubeClient
from numa_align.kubeconfig import ClusterConfig
from numa_align.nrt_api import API_VERSION, CRD_NAME, PLURAL
from numa_align.publishing import NrtPublisher
from numa_align.settings import Settings
from numa_align.sysfs import HostTopology

from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, serve_pod_resources
from tests.plugin.conftest import IDLE, NODE

PINNED = PodAlloc("numa", "pinned", [ContainerAlloc("app", cpus=[2, 3])])


@pytest.fixture
def publisher(socket_dir, host, client, clock, cgroup_root) -> NrtPublisher:
    settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket_dir / "pod-resources.sock",
                        cgroup_root=cgroup_root, topology_policy="single-numa-node", topology_scope="pod",
                        metrics_addr=None)
    return NrtPublisher(settings, lambda: host, client, clock=clock, jitter=lambda: 0.0)


def cpu(nrt: dict, zone: str) -> tuple[str, str, str]:
    [found] = [z for z in nrt["zones"] if z["name"] == zone]
    [row] = [r for r in found["resources"] if r["name"] == "cpu"]
    return row["capacity"], row["allocatable"], row["available"]


def attributes(nrt: dict) -> dict[str, str]:
    return {a["name"]: a["value"] for a in nrt["attributes"]}


def test_the_object_is_created_with_a_zone_per_numa_node_and_owned_by_the_node(publisher, pod_resources, fake):
    publisher.poll_once()
    assert (publisher.status, fake.writes) == ("published", [("create", NODE)])
    stored = fake.nrts[NODE]
    assert (stored["apiVersion"], stored["kind"]) == (API_VERSION, "NodeResourceTopology")
    assert [z["name"] for z in stored["zones"]] == ["node-0", "node-1"]
    assert cpu(stored, "node-0") == ("4", "3", "3") and cpu(stored, "node-1") == ("4", "4", "4")
    assert stored["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": fake.nodes[NODE]}]
    assert attributes(stored) == {
        "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod", "cpusPerCore": "1",
        "nodeTopologyPodsFingerprint": pod_fingerprint([("default", "idle")]),
        "nodeTopologyPodsFingerprintMethod": "all"}
    assert publisher.last_published is not None and publisher.last_published["zones"] == stored["zones"]


def test_nothing_changed_no_write_then_pinned_cpus_lower_available(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    for _ in range(3):
        clock.advance(2)
        publisher.poll_once()
    # the same answer on the same topology: not even built again (an idle emulated node only asks)
    assert (publisher.status, fake.writes) == ("unchanged", [("create", NODE)])
    pod_resources.set_pods([IDLE, PINNED])
    fake.set_pod("numa", "pinned", NODE)
    clock.advance(2)
    publisher.poll_once()
    assert fake.writes == [("create", NODE), ("update", NODE)]
    stored = fake.nrts[NODE]
    assert cpu(stored, "node-0") == ("4", "3", "1") and cpu(stored, "node-1") == ("4", "4", "4")
    assert attributes(stored)["nodeTopologyPodsFingerprint"] == pod_fingerprint(
        [("default", "idle"), ("numa", "pinned")])


def test_an_idle_hour_writes_nothing_and_reads_the_object_once_a_minute(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    for _ in range(1800):  # an hour of polls every 2 s
        clock.advance(2)
        publisher.poll_once()
    assert fake.writes == [("create", NODE)]  # the 60-s rewrite made it 61
    nrt_gets = [path for method, path, _who in fake.seen if method == "GET" and PLURAL in path]
    assert len(nrt_gets) == 61  # the version read before the first write, then one a minute, from the cache:
    assert all(path.endswith("?resourceVersion=0") for path in nrt_gets[1:])


def test_an_object_deleted_or_edited_by_hand_comes_back_within_a_minute(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    written = fake.nrts[NODE]["zones"]
    del fake.nrts[NODE]
    clock.advance(58)
    publisher.poll_once()
    assert NODE not in fake.nrts
    clock.advance(2)
    publisher.poll_once()
    assert fake.writes == [("create", NODE), ("create", NODE)] and fake.nrts[NODE]["zones"] == written
    fake.nrts[NODE]["zones"] = []
    fake.touch(NODE)  # kubectl edit: a new resourceVersion
    clock.advance(60)
    publisher.poll_once()
    assert fake.writes[-1] == ("update", NODE) and fake.nrts[NODE]["zones"] == written
    fake.touch(NODE)  # a label added: another version, the same content
    clock.advance(60)
    publisher.poll_once()
    assert len(fake.writes) == 3


def test_two_changes_a_moment_apart_are_both_written_at_once(publisher, pod_resources, fake, clock):
    """A pod's deletion and the next one's admission 0.2 s later: both written when they happen (a burst of
    two), where one write a second made the second wait 0.8 s."""
    publisher.poll_once()
    clock.advance(30)  # quiet: the bucket is full
    for step in (1, 2):
        pod_resources.set_pods([IDLE] + [PodAlloc("numa", f"p{i}", [ContainerAlloc("app", cpus=[i])])
                                         for i in range(1, step + 1)])
        clock.advance(0.2)
        publisher.poll_once()
        assert len(fake.writes) == 1 + step, publisher.status


def test_a_fast_stream_of_changes_is_written_once_a_second_after_the_burst(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    clock.advance(30)
    for step in range(1, 51):  # a change every 0.2 s for 10 s
        pod_resources.set_pods([IDLE, PodAlloc("numa", f"p{step}", [ContainerAlloc("app", cpus=[1])])])
        clock.advance(0.2)
        publisher.poll_once()
    assert 2 + 9 <= len(fake.writes) - 1 <= 2 + 10  # the burst, then one per second
    assert publisher.status.startswith("change waiting") or publisher.status in ("published", "unchanged")
    clock.advance(1.0)
    publisher.poll_once()  # the latest change is written once allowed
    assert fake.nrts[NODE] == publisher.last_published or publisher.status == "published"


def test_crd_missing_is_logged_once_and_publishing_resumes_when_it_appears(publisher, pod_resources, fake, clock,
                                                                           caplog):
    caplog.set_level(logging.INFO, "numa_align.publishing")
    fake.crd_installed = False
    for _ in range(3):
        publisher.poll_once()
        clock.advance(2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"the NodeResourceTopology CRD ({CRD_NAME}) is not installed" in warnings[0]
    assert publisher.status.startswith(f"NodeResourceTopology {NODE} not published") and not fake.nrts
    fake.crd_installed = True
    clock.advance(publisher.backoff.remaining())
    publisher.poll_once()
    assert fake.writes == [("create", NODE)]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert f"publishing NodeResourceTopology {NODE} works again (after: CRD missing)" in infos


def test_an_absent_pod_resources_socket_is_logged_once_and_recovered_from(publisher, socket_dir, fake, clock, caplog):
    caplog.set_level(logging.INFO, "numa_align.publishing")
    for _ in range(2):
        publisher.poll_once()
        clock.advance(2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"no socket at {socket_dir}/pod-resources.sock" in warnings[0]
    assert "NUMA_ALIGN_POD_RESOURCES_SOCKET" in warnings[0] and not fake.writes
    with serve_pod_resources(socket_dir / "pod-resources.sock") as double:
        double.set_allocatable(range(8))
        publisher.poll_once()
    assert fake.writes == [("create", NODE)] and cpu(fake.nrts[NODE], "node-0") == ("4", "4", "4")
    assert any("reading PodResources at" in r.getMessage() and "works again" in r.getMessage()
               for r in caplog.records)


def test_a_deleted_node_is_named_and_a_recreated_one_owns_the_new_object(publisher, pod_resources, fake, clock,
                                                                         caplog):
    publisher.poll_once()
    fake.delete_node(NODE)  # its NRT object goes with it
    assert not fake.nrts
    clock.advance(60)
    publisher.poll_once()
    assert f"node '{NODE}' is not in the API server" in publisher.status
    assert "NUMA_ALIGN_NODE_NAME (--node-name)" in publisher.status
    uid = fake.add_node(NODE)
    clock.advance(2)
    publisher.poll_once()
    assert fake.writes == [("create", NODE), ("create", NODE)]
    assert fake.nrts[NODE]["metadata"]["ownerReferences"][0]["uid"] == uid


def test_a_conflict_is_read_again_and_retried_once(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    fake.touch(NODE)  # someone else wrote it
    pod_resources.set_pods([IDLE, PINNED])
    fake.set_pod("numa", "pinned", NODE)
    clock.advance(2)
    publisher.poll_once()
    assert publisher.status == "published" and fake.writes == [("create", NODE), ("update", NODE)]
    assert fake.nrts[NODE] == publisher.last_published or publisher.status == "published"
    puts = [path for method, path, _who in fake.seen if method == "PUT"]
    assert len(puts) == 2  # the refused one and the retry


def test_forbidden_names_the_right_missing_and_is_logged_once(publisher, pod_resources, fake, clock, caplog):
    fake.forbidden = {"create"}
    for _ in range(3):
        publisher.poll_once()
        clock.advance(2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"may not create {CRD_NAME}" in warnings[0]
    assert f"grant 'create' on {CRD_NAME}" in warnings[0]
    fake.forbidden = set()
    clock.advance(publisher.backoff.remaining())
    publisher.poll_once()
    assert fake.writes == [("create", NODE)]


def test_an_unexpected_error_stays_in_the_thread(publisher, pod_resources, caplog):
    def broken() -> HostTopology:
        raise RuntimeError("sysfs went away")

    working = publisher._topology
    publisher._topology = broken
    publisher.poll_once()
    publisher.poll_once()
    assert publisher.status == "unexpected RuntimeError: sysfs went away"
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    caplog.set_level(logging.INFO, "numa_align.publishing")
    publisher._topology = working
    publisher.poll_once()
    assert publisher.status == "published"
    assert "the PodResources poll works again (after: unexpected)" in caplog.messages


def test_the_thread_polls_at_once_wakes_on_poke_and_stops(socket_dir, host, client, pod_resources, fake):
    settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket_dir / "pod-resources.sock",
                        poll_interval=60.0)
    publisher = NrtPublisher(settings, lambda: host, client, min_interval=0.0)
    publisher.start()
    try:
        assert _wait(lambda: len(fake.writes) == 1), publisher.status
        pod_resources.set_pods([IDLE, PINNED])
        fake.set_pod("numa", "pinned", NODE)
        publisher.poke()
        assert _wait(lambda: len(fake.writes) == 2), publisher.status
    finally:
        publisher.stop()
    assert publisher._thread is not None and not publisher._thread.is_alive()


def test_without_a_client_only_the_gauges_are_set(socket_dir, host, pod_resources):
    settings = replace(Settings(), pod_resources_socket=socket_dir / "pod-resources.sock")
    publisher = NrtPublisher(settings, lambda: host)
    publisher.poll_once()
    assert publisher.status == "gauges set" and publisher.last_published is None
    with pytest.raises(ValueError, match="needs settings.node_name"):
        NrtPublisher(settings, lambda: host, KubeClient(ClusterConfig(server="http://127.0.0.1:1", source="t")))


def _wait(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
