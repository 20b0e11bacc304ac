"""The NRT publisher wakes when the kubelet rewrites a checkpoint in its root directory (a fake one here): a
rename into place or a write in place polls at once, long before the poll interval (30 s in these tests); a
burst of renames polls once; other files wake nothing; a directory that cannot be watched leaves the poll
alone, said once, and is watched once it appears. Each write's latency goes to the histogram once."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from numa_align.checkpoint_watch import CheckpointWatch
from numa_align.kubelet_sources import CPU_STATE, MEMORY_STATE, PodResources, PodResourcesReader
from numa_align.metrics import Metrics
from numa_align.publishing import NrtPublisher
from numa_align.settings import Settings

from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, PodResourcesDouble, serve_pod_resources
from tests.plugin.conftest import IDLE, NODE, Clock
from tests.plugin.test_publishing import _wait

PINNED = PodAlloc("numa", "pinned", [ContainerAlloc("app", cpus=[2, 3])])
LATENCY = "numa_align_nrt_update_latency_seconds"


class CountingQuery:
    """The publisher's PodResources query: asks the double, counts the polls and sets `polled` after each."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.polls = 0
        self.polled = threading.Event()
        self._reader = PodResourcesReader()

    def __call__(self, _socket: Path) -> PodResources:
        answer = self._reader(self.socket)
        self.polls += 1
        self.polled.set()
        return answer

    def next_poll(self, timeout: float = 5.0) -> bool:
        """Forget the polls so far; wait for the next one."""
        self.polls = 0
        self.polled.clear()
        return self.polled.wait(timeout)


@pytest.fixture
def kubelet_root(socket_dir: Path) -> Path:
    """A kubelet root directory with its pod-resources/ subdirectory (the socket under /tmp: short paths)."""
    (socket_dir / "pod-resources").mkdir()
    return socket_dir


@pytest.fixture
def double(kubelet_root: Path) -> Iterator[PodResourcesDouble]:
    with serve_pod_resources(kubelet_root / "pod-resources" / "kubelet.sock") as double:
        double.set_allocatable(range(1, 8))
        double.set_pods([IDLE])
        yield double


@pytest.fixture
def query(kubelet_root: Path, double: PodResourcesDouble) -> CountingQuery:
    return CountingQuery(kubelet_root / "pod-resources" / "kubelet.sock")


def settings_for(root: Path, **changes) -> Settings:
    return Settings(**{"pod_resources_socket": root / "pod-resources" / "kubelet.sock", "poll_interval": 30.0,
                       "metrics_addr": None, **changes})


def checkpoint(root: Path, name: str = CPU_STATE, text: str = '{"policyName":"static"}') -> None:
    """Write a checkpoint as the kubelet does: a temporary file renamed into place."""
    temp = root / f".{name}.tmp"
    temp.write_text(text)
    os.rename(temp, root / name)


@pytest.fixture
def running() -> Iterator[list[NrtPublisher]]:
    """Publishers started in a test, stopped after it."""
    started: list[NrtPublisher] = []
    yield started
    for publisher in started:
        publisher.stop()


def start(running: list[NrtPublisher], publisher: NrtPublisher, query: CountingQuery) -> NrtPublisher:
    query.polled.clear()
    publisher.start()
    running.append(publisher)
    assert query.polled.wait(5), "no first poll at start"
    return publisher


def test_a_checkpoint_renamed_into_place_polls_at_once(kubelet_root, host, query, running):
    publisher = start(running, NrtPublisher(settings_for(kubelet_root), lambda: host, query=query), query)
    assert publisher._wake.watching
    query.polled.clear()
    checkpoint(kubelet_root, CPU_STATE)
    assert query.polled.wait(5), "no poll within 5 s of the rename; the poll interval is 30 s"
    query.polled.clear()
    checkpoint(kubelet_root, MEMORY_STATE)
    assert query.polled.wait(5), "the memory manager's checkpoint did not wake the publisher"


def test_a_checkpoint_written_in_place_polls_at_once(kubelet_root, host, query, running):
    (kubelet_root / CPU_STATE).write_text("{}")
    start(running, NrtPublisher(settings_for(kubelet_root), lambda: host, query=query), query)
    query.polled.clear()
    (kubelet_root / CPU_STATE).write_text('{"policyName":"static"}')  # no create, no rename: a close after a write
    assert query.polled.wait(5), "a checkpoint written in place did not wake the publisher"


def test_a_burst_of_renames_polls_once_or_twice_not_five_times(kubelet_root, host, query, running):
    start(running, NrtPublisher(settings_for(kubelet_root), lambda: host, query=query), query)
    query.polls = 0
    query.polled.clear()
    for n in range(5):
        checkpoint(kubelet_root, (CPU_STATE, MEMORY_STATE)[n % 2], f'{{"n":{n}}}')
        time.sleep(0.005)
    assert query.polled.wait(5)
    time.sleep(0.5)  # any poll the burst would still cause has run by now
    assert 1 <= query.polls <= 2, f"{query.polls} polls for one burst of 5 renames"


def test_other_files_in_the_kubelet_dir_wake_nothing(kubelet_root, host, query, running):
    start(running, NrtPublisher(settings_for(kubelet_root), lambda: host, query=query), query)
    query.polled.clear()
    checkpoint(kubelet_root, "dra_manager_state")
    (kubelet_root / "cpu_manager_state.bak").write_text("{}")
    assert not query.polled.wait(0.5)


def test_an_unwatchable_dir_leaves_the_poll_said_once_then_is_watched_when_it_appears(
        socket_dir, host, query, running, caplog):
    caplog.set_level(logging.INFO, "numa_align.checkpoint_watch")
    missing = socket_dir / "kubelet"
    publisher = NrtPublisher(settings_for(missing, poll_interval=0.05), lambda: host, query=query)
    start(running, publisher, query)
    for _ in range(3):  # polling goes on, every 0.05 s
        assert query.next_poll(), publisher.status
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"cannot watch {missing} for the kubelet's checkpoints (no such directory): the "
                        "NodeResourceTopology object follows pod admissions at the next poll only"]
    assert not publisher._wake.watching
    publisher.stop()

    slow = NrtPublisher(settings_for(missing), lambda: host, query=query)
    start(running, slow, query)
    (missing / "pod-resources").mkdir(parents=True)
    slow.poke()  # the next wait looks again
    assert query.next_poll()
    assert _wait(lambda: f"watching {missing} for the kubelet's checkpoints again" in caplog.messages)
    assert slow._wake.watching
    query.polled.clear()
    checkpoint(missing)
    assert query.polled.wait(5), "the directory that appeared is not watched"


def test_the_histogram_has_one_value_per_write(kubelet_root, host, query, double, client, fake, running,
                                               cgroup_root):
    metrics = Metrics()
    settings = settings_for(kubelet_root, nrt=True, node_name=NODE, cgroup_root=cgroup_root)
    publisher = NrtPublisher(settings, lambda: host, client, metrics, min_interval=0.0, query=query)
    start(running, publisher, query)
    count = lambda: metrics.registry.get_sample_value(f"{LATENCY}_count")  # noqa: E731
    assert _wait(lambda: len(fake.writes) == 1 and count() == 1), publisher.status
    double.set_pods([IDLE, PINNED])
    fake.set_pod("numa", "pinned", NODE)
    checkpoint(kubelet_root)
    assert _wait(lambda: len(fake.writes) == 2 and count() == 2), publisher.status
    assert 0 < metrics.registry.get_sample_value(f"{LATENCY}_sum") < 5  # far below the 30 s poll
    checkpoint(kubelet_root)  # the same allocation written again: a poll, no write, no value
    assert _wait(lambda: publisher.status == "unchanged")
    assert (len(fake.writes), count()) == (2, 1 + 1)


def test_latency_counts_from_the_event_through_a_deferred_write(kubelet_root):
    clock, values = Clock(), []
    watch = CheckpointWatch(kubelet_root, clock=clock, observe=values.append)
    watch.open()
    try:
        checkpoint(kubelet_root)
        watch.wait(5)
        seen = clock.now
        clock.advance(0.3)
        watch.polled(wrote=False, waiting=watch.polling(0) == 0)  # at most one write a second: it waits
        clock.advance(0.7)
        watch.polling(0)
        watch.polled(wrote=True, waiting=False)
        assert values == [pytest.approx(clock.now - seen)] == [pytest.approx(1.0)]
        watch.polling(0)  # a poll without an event: from its start
        clock.advance(0.02)
        watch.polled(wrote=True, waiting=False)
        watch.polling(0)
        watch.polled(wrote=False, waiting=False)  # nothing to write: no value
        assert values[1:] == [pytest.approx(0.02)]
    finally:
        watch.close()

