"""NrtPublisher's life beside the object: the node's Lease (renewed, recreated, a missing right logged once
without stopping the object), backoff with jitter while the API server is down (PodResources still read for
the gauges), and the fingerprint covering every pod the kubelet lists, whatever the API says of its phase:
numa-lab's scheduler counts every bound, unfinished pod, so the object must show each one it accounts for."""

from __future__ import annotations

import datetime
import logging

import pytest
from numa_align.backoff import Backoff
from numa_align.fingerprint import pod_fingerprint
from numa_align.leases import NAMESPACE, lease_name
from numa_align.metrics import Metrics
from numa_align.publishing import NrtPublisher
from numa_align.settings import Settings

from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc
from tests.plugin.conftest import IDLE, NODE
from tests.plugin.test_publishing import attributes

STUCK = PodAlloc("numa", "stuck", [ContainerAlloc("app", cpus=[1])])  # ImagePullBackOff: admitted, CPUs held
LEASE = (NAMESPACE, lease_name(NODE))
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.fixture
def publisher(socket_dir, host, client, clock, cgroup_root) -> NrtPublisher:
    settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket_dir / "pod-resources.sock",
                        cgroup_root=cgroup_root, metrics_addr=None)
    return NrtPublisher(settings, lambda: host, client, Metrics(), clock=clock, jitter=lambda: 0.5,
                        wall=lambda: T0 + datetime.timedelta(seconds=clock.now - 1000))


def fingerprint(fake) -> str:
    return attributes(fake.nrts[NODE])["nodeTopologyPodsFingerprint"]


def test_the_lease_is_created_owned_by_the_node_and_renewed_every_40_s(publisher, pod_resources, fake, clock):
    publisher.poll_once()
    lease = fake.leases[LEASE]
    assert lease["metadata"]["ownerReferences"][0]["uid"] == fake.nodes[NODE]
    assert lease["spec"] == {"holderIdentity": f"numa-align@{NODE}", "leaseDurationSeconds": 120,
                             "acquireTime": "2026-01-02T03:04:05.000000Z", "renewTime": "2026-01-02T03:04:05.000000Z"}
    for _ in range(19):  # 38 s
        clock.advance(2)
        publisher.poll_once()
    assert fake.lease_writes == [("create", lease_name(NODE))]
    clock.advance(2)
    publisher.poll_once()
    assert fake.lease_writes[-1] == ("update", lease_name(NODE))
    assert fake.leases[LEASE]["spec"]["renewTime"] == "2026-01-02T03:04:45.000000Z"
    assert fake.leases[LEASE]["spec"]["acquireTime"] == "2026-01-02T03:04:05.000000Z"
    del fake.leases[LEASE]  # deleted by hand: back at the next renewal
    clock.advance(40)
    publisher.poll_once()
    assert fake.lease_writes[-1] == ("create", lease_name(NODE)) and LEASE in fake.leases


def test_no_right_to_the_lease_is_logged_once_and_the_object_is_still_published(publisher, pod_resources, fake,
                                                                                clock, caplog):
    fake.forbidden_resources = {"leases"}
    for _ in range(50):
        publisher.poll_once()
        clock.advance(2)
    assert fake.writes == [("create", NODE)] and publisher.status == "unchanged"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Lease is not renewed" in warnings[0] and "may not get leases" in warnings[0]
    assert publisher.backoff.failures == 0  # not an outage: the API calls keep their pace


def test_the_api_backs_off_with_jitter_while_podresources_keeps_its_pace(publisher, pod_resources, fake, clock,
                                                                         caplog):
    publisher.poll_once()
    fake.down = True
    pod_resources.set_pods([IDLE, PodAlloc("numa", "new", [ContainerAlloc("app", cpus=[5])])])
    fake.set_pod("numa", "new", NODE)
    attempts, polls = [], 0
    for _ in range(150):  # 300 s
        clock.advance(2)
        before = len(fake.seen)
        publisher.poll_once()
        polls += 1
        if len(fake.seen) > before:
            attempts.append(clock.now)
    gaps = [round(b - a) for a, b in zip(attempts, attempts[1:], strict=False)]
    # equal jitter drawn at 0.5: 3/4 of 2, 4, 8, 16, 32, 60, 60 s, each rounded up to the next 2-s poll
    assert gaps[:7] == [2, 4, 6, 12, 24, 46, 46], gaps
    assert publisher.metrics.cpus_allocated.labels(node="1")._value.get() == 1  # the gauges followed the kubelet
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "backing off up to 60s" in warnings[0]
    fake.down = False
    clock.advance(publisher.backoff.remaining())
    publisher.poll_once()
    assert publisher.status == "published" and publisher.backoff.failures == 0
    clock.advance(2)
    before = len(fake.seen)
    publisher.poll_once()  # reset: the next poll may call the API again (nothing to do, so it does not)
    assert publisher.status == "unchanged" and len(fake.seen) == before


def test_backoff_doubles_to_its_most_and_equal_jitter_keeps_half_of_it():
    now, draw = [0.0], [0.0]
    backoff = Backoff(2.0, 60.0, jitter=lambda: draw[0], clock=lambda: now[0])
    assert [backoff.failed() for _ in range(3)] == [1.0, 2.0, 4.0]  # the lowest draw: half of 2, 4, 8
    draw[0] = 0.999
    assert round(backoff.failed(), 2) == 15.99  # the highest: almost all of 16
    draw[0] = 0.5
    for _ in range(10):
        backoff.failed()
    assert backoff.delay == 60.0 * 0.75 and backoff.remaining() == 45.0 and not backoff.is_due()
    backoff.reset()
    assert backoff.is_due() and backoff.failed() == 1.5


def pod_lists(fake) -> int:
    return sum(1 for method, path, _ in fake.seen if method == "GET" and path.startswith("/api/v1/pods"))


def test_the_fingerprint_is_of_every_pod_the_kubelet_lists_a_pending_one_included(publisher, pod_resources, fake,
                                                                                   clock):
    """The stuck pod (ImagePullBackOff: admitted, its CPU held, Pending in the API) is in the kubelet's list and
    in the set numa-lab's scheduler counts, so it is fingerprinted from the first poll; a pod bound but not yet
    admitted is in neither the list nor the object. No pod list serves the fingerprint: the only ones are the
    auditor's, looking for the stuck container's cgroup."""
    pod_resources.set_pods([IDLE, STUCK])
    fake.set_pod("numa", "stuck", NODE, phase="Pending")
    fake.set_pod("numa", "bound-only", NODE, phase="Pending")  # bound, not admitted yet
    publisher.poll_once()
    assert fingerprint(fake) == pod_fingerprint([("default", "idle"), ("numa", "stuck")])
    for _ in range(30):
        clock.advance(2)
        publisher.poll_once()
    assert fake.writes == [("create", NODE)] and pod_lists(fake) == publisher.auditor.lists
    pod_resources.set_pods([IDLE])  # the stuck pod deleted: gone from the kubelet's list, so from the object
    clock.advance(2)
    publisher.poll_once()
    assert fake.writes[-1] == ("update", NODE) and fingerprint(fake) == pod_fingerprint([("default", "idle")])


def test_the_fingerprint_needs_no_right_to_list_pods_and_an_idle_node_lists_none(publisher, pod_resources, fake,
                                                                                  clock):
    fake.forbidden_resources = {"pods"}
    pod_resources.set_pods([IDLE, STUCK])
    publisher.poll_once()
    assert publisher.status == "published"
    assert fingerprint(fake) == pod_fingerprint([("default", "idle"), ("numa", "stuck")])
    fake.forbidden_resources = set()
    pod_resources.set_pods([IDLE])  # no pinned container: the auditor has nothing to look for either
    lists = pod_lists(fake)
    for _ in range(300):
        clock.advance(2)
        publisher.poll_once()
    assert pod_lists(fake) == lists and fingerprint(fake) == pod_fingerprint([("default", "idle")])
