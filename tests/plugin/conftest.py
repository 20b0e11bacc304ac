"""Fixtures for plugin tests: short socket directories, fake sysfs trees, a kubelet double, a plugin, and for
the NRT publisher: a host, the kubelet's PodResources, the fake API server with its client, a fake clock."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from numa_align.discovery import discover
from numa_align.kubeapi import KubeClient
from numa_align.kubeconfig import ClusterConfig
from numa_align.running import Plugin
from numa_align.serving import BindError, Endpoint
from numa_align.settings import Settings
from numa_align.sysfs import HostTopology, read_sysfs

from tests.fakesysfs import GIB_KIB, write_node_tree
from tests.kubeletdouble import KubeletDouble
from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, PodResourcesDouble, serve_pod_resources
from tests.plugin.fakecgroup import write_cgroup_root
from tests.plugin.fakekube import FakeKube, serve_kube

NODE = "worker-1"
IDLE = PodAlloc("default", "idle", [ContainerAlloc("app")])


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A directory under /tmp: unix socket paths must stay under 108 bytes, pytest's tmp_path may not."""
    path = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cgroup_root(tmp_path: Path) -> Path:
    """An empty cgroup v2 tree (no pod's cgroup): publishers in tests audit it instead of the machine's."""
    return write_cgroup_root(tmp_path / "cgroup")


@pytest.fixture
def make_sysfs(tmp_path: Path) -> Callable[..., Path]:
    """make_sysfs({id: cpulist}, ...) writes a fake tree and returns its sysfs mount point."""

    def make(cells: Mapping[int, str], **kwargs) -> Path:
        return write_node_tree(tmp_path / "sys", cells, **kwargs)

    return make


class BindSpy:
    """Stands in for Endpoint.start: records each attempt as (node, bound, time.monotonic()) and runs
    `before_next` (see `arm`), once, on the plugin's thread just before the next attempt binds."""

    def __init__(self, real_start: Callable[[Endpoint], None]) -> None:
        self.attempts: list[tuple[int, bool, float]] = []
        self.before_next: Callable[[], object] | None = None
        self._real_start = real_start
        self._cond = threading.Condition()

    def arm(self, before_next: Callable[[], object]) -> None:
        """Forget the attempts so far; run `before_next` just before the next attempt binds."""
        with self._cond:
            self.attempts.clear()
            self.before_next = before_next

    def start(self, endpoint: Endpoint) -> None:
        with self._cond:
            before, self.before_next = self.before_next, None
        if before is not None:
            before()
        try:
            self._real_start(endpoint)
        except BindError:
            self._record(endpoint.servicer.node, False)
            raise
        self._record(endpoint.servicer.node, True)

    def _record(self, node: int, bound: bool) -> None:
        with self._cond:
            self.attempts.append((node, bound, time.monotonic()))
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[tuple[int, bool, float]]], bool], timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.attempts), timeout=timeout)


@pytest.fixture
def bind_spy(monkeypatch: pytest.MonkeyPatch) -> BindSpy:
    spy = BindSpy(Endpoint.start)
    monkeypatch.setattr(Endpoint, "start", lambda endpoint: spy.start(endpoint))  # a function: binds as a method
    return spy


@pytest.fixture
def kubelet(socket_dir: Path) -> Iterator[KubeletDouble]:
    double = KubeletDouble(socket_dir)
    double.start()
    yield double
    double.stop()


@pytest.fixture
def base_settings(socket_dir: Path) -> Settings:
    return Settings(capacity=3, socket_dir=socket_dir, metrics_addr=None, rescan_interval=60.0)


@contextmanager
def running_plugin(settings: Settings, **changes) -> Iterator[Plugin]:
    """Run a Plugin in a thread until the block ends; re-raise what run() raised."""
    settings = replace(settings, **changes)
    plugin = Plugin(settings, discover(settings))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            plugin.run()
        except BaseException as exc:  # handed to the test thread below
            failures.append(exc)

    thread = threading.Thread(target=run, name="plugin", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not plugin.ready.wait(0.05) and thread.is_alive() and time.monotonic() < deadline:
            pass  # a start that fails ends the thread: no need to wait the 10 s out
        assert plugin.ready.is_set() or failures, "plugin did not start serving"
        if failures:
            raise failures[0]
        yield plugin
    finally:
        plugin.stop("test done")
        thread.join(10)
    assert not thread.is_alive(), "plugin.run() did not return after stop()"
    if failures:
        raise failures[0]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def host(make_sysfs) -> HostTopology:
    """Two nodes of 4 CPUs and 4 GiB each."""
    return read_sysfs(make_sysfs({0: "0-3", 1: "4-7"}, memory_kib=4 * GIB_KIB))


@pytest.fixture
def pod_resources(socket_dir: Path) -> Iterator[PodResourcesDouble]:
    """The kubelet's PodResources: static CPU Manager with CPU 0 reserved, one pod without exclusive CPUs."""
    with serve_pod_resources(socket_dir / "pod-resources.sock") as double:
        double.set_allocatable(range(1, 8))
        double.set_pods([IDLE])
        yield double


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    fake = FakeKube()
    fake.add_node(NODE)
    fake.set_pod("default", "idle", NODE)  # Running in the API, as the kubelet lists it
    return fake


@pytest.fixture
def client(fake: FakeKube) -> Iterator[KubeClient]:
    with serve_kube(fake) as url:
        yield KubeClient(ClusterConfig(server=url, source="test kubeconfig"), timeout=2.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()
