"""The kubelet guard's moves of this boot as Events on the Node, posted by the NRT publisher after an API turn
that succeeded: one per move, never twice (a restart in the same boot is answered 409, which counts as done),
a missing right said once and not tried again, any other failure tried again at the next API turn."""

from __future__ import annotations

import datetime
import json
import logging

import pytest
from numa_align.guard_events import NAMESPACE
from numa_align.guard_report import SetAside
from numa_align.metrics import Metrics
from numa_align.publishing import NrtPublisher
from numa_align.settings import Settings

from tests.plugin.conftest import NODE

BOOT = "7c1d2e3f-1111-4a4a-8b8b-0d3b1b7c0002"
CPU = SetAside("/var/lib/kubelet/cpu_manager_state", f"/var/lib/kubelet/cpu_manager_state.mismatch-{BOOT}",
               "it holds CPUs 0-3 but the machine has 0-2 online (no longer there: 3)", BOOT)
MEMORY = SetAside("/var/lib/kubelet/memory_manager_state", f"/var/lib/kubelet/memory_manager_state.mismatch-{BOOT}",
                  "NUMA node 1 memory: total 2Gi in it, 1792Mi on the machine", BOOT)
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
NAMES = [f"{NODE}.numa-align-guard-7c1d2e3f-0", f"{NODE}.numa-align-guard-7c1d2e3f-1"]


class Record:
    """A guard record that holds `entries` from the start and never changes."""

    def __init__(self, entries) -> None:
        self.entries: list | None = list(entries)

    def changed(self):
        entries, self.entries = self.entries, None
        return entries


@pytest.fixture
def make_publisher(socket_dir, host, client, clock):
    def make(set_aside=(CPU, MEMORY), record=None) -> NrtPublisher:
        settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket_dir / "pod-resources.sock",
                            metrics_addr=None)
        return NrtPublisher(settings, lambda: host, client, Metrics(), clock=clock, jitter=lambda: 0.5,
                            wall=lambda: T0, guard_record=record or Record(set_aside))

    return make


def event_posts(fake) -> int:
    return sum(1 for method, path, _who in fake.seen if method == "POST" and path.endswith("/events"))


def test_each_move_is_an_event_on_the_node_posted_once(make_publisher, pod_resources, fake, clock):
    publisher = make_publisher()
    publisher.poll_once()
    assert sorted(fake.events) == [(NAMESPACE, name) for name in NAMES] and NAMESPACE == "default"
    assert fake.events[(NAMESPACE, NAMES[0])] == {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": NAMES[0], "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": fake.nodes[NODE]},
        "reason": "KubeletCheckpointSetAside", "type": "Warning",
        "message": f"numa-lab's kubelet guard moved {CPU.file} to {CPU.aside} at boot {BOOT}: {CPU.reason}",
        "source": {"component": "numa-align", "host": NODE},
        "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:05Z", "count": 1}
    assert fake.events[(NAMESPACE, NAMES[1])]["message"].endswith(MEMORY.reason)
    for _ in range(5):
        clock.advance(60)
        publisher.poll_once()
    assert event_posts(fake) == 2


def test_a_numa_align_restarted_in_the_same_boot_posts_none_again(make_publisher, pod_resources, fake, caplog):
    make_publisher().poll_once()
    posted = dict(fake.events)
    again = make_publisher()
    with caplog.at_level(logging.WARNING):
        again.poll_once()
    assert fake.events == posted and event_posts(fake) == 4  # answered 409 AlreadyExists: done
    assert again.guard_events.pending == 0 and caplog.records == []


def test_no_right_to_post_is_said_once_and_not_tried_again(make_publisher, pod_resources, fake, clock, caplog):
    fake.forbidden_resources = {"events"}
    publisher = make_publisher()
    for _ in range(10):
        publisher.poll_once()
        clock.advance(60)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "may not create events" in warnings[0] and CPU.file in warnings[0]
    assert event_posts(fake) == 1 and fake.events == {}
    assert fake.writes == [("create", NODE)] and publisher.backoff.failures == 0  # the object is not held up


def test_another_failure_is_tried_again_at_the_next_api_turn(make_publisher, pod_resources, fake, clock, caplog):
    fake.events_failing = True
    publisher = make_publisher()
    for _ in range(3):
        publisher.poll_once()
        clock.advance(2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "trying again at the next API turn" in warnings[0]
    assert event_posts(fake) == 3 and publisher.backoff.failures == 0
    fake.events_failing = False
    publisher.poll_once()
    assert sorted(name for _ns, name in fake.events) == NAMES and publisher.guard_events.pending == 0


def test_nothing_is_posted_until_an_api_turn_succeeds(make_publisher, pod_resources, fake, clock):
    fake.down = True
    publisher = make_publisher()
    publisher.poll_once()
    assert event_posts(fake) == 0 and publisher.backoff.failures == 1
    fake.down = False
    clock.advance(publisher.backoff.remaining())
    publisher.poll_once()
    assert len(fake.events) == 2


def test_nothing_to_post_without_moves_or_without_publishing(make_publisher, socket_dir, host, pod_resources, fake):
    quiet = make_publisher(set_aside=())
    quiet.poll_once()
    assert quiet.guard_events.pending == 0 and event_posts(fake) == 0
    settings = Settings(pod_resources_socket=socket_dir / "pod-resources.sock", metrics_addr=None)
    assert NrtPublisher(settings, lambda: host, None, Metrics(), guard_record=Record([CPU])).guard_events is None


def test_a_record_the_guard_writes_after_numa_align_started_is_seen(make_publisher, pod_resources, fake, clock,
                                                                    tmp_path):
    """At boot the kubelet (and its guard) may start after numa-align, or be started again by hand after a
    refusal: the record is looked at every poll, and its moves become gauges and Events then."""
    from numa_align.guard_report import GuardRecord

    boot_id = tmp_path / "boot_id"
    boot_id.write_text(BOOT + "\n")
    record = tmp_path / "kubelet-guard.json"
    record.write_text(json.dumps({"bootId": "an-earlier-boot", "moved": [
        {"file": CPU.file, "aside": CPU.aside, "reason": CPU.reason}]}))
    publisher = make_publisher(record=GuardRecord(record, boot_id))
    publisher.poll_once()
    clock.advance(60)
    publisher.poll_once()
    assert event_posts(fake) == 0  # an earlier boot's record is old news
    gauge = publisher.metrics.registry.get_sample_value
    assert gauge("numa_align_kubelet_checkpoint_set_aside", {"file": MEMORY.file}) is None
    record.write_text(json.dumps({"bootId": BOOT, "moved": [
        {"file": MEMORY.file, "aside": MEMORY.aside, "reason": MEMORY.reason}]}))
    clock.advance(60)
    publisher.poll_once()
    assert sorted(fake.events) == [(NAMESPACE, NAMES[0])]
    assert fake.events[(NAMESPACE, NAMES[0])]["message"].endswith(MEMORY.reason)
    assert gauge("numa_align_kubelet_checkpoint_set_aside", {"file": MEMORY.file}) == 1.0
    clock.advance(60)
    publisher.poll_once()
    assert event_posts(fake) == 1  # unchanged record: nothing read again, nothing posted again
