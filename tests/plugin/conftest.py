"""Fixtures for plugin tests: short socket directories, fake sysfs trees, a kubelet double, a plugin."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from numa_align.discovery import discover
from numa_align.running import Plugin
from numa_align.settings import Settings

from tests.fakesysfs import write_node_tree
from tests.kubeletdouble import KubeletDouble


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A directory under /tmp: unix socket paths must stay under 108 bytes, pytest's tmp_path may not."""
    path = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_sysfs(tmp_path: Path) -> Callable[..., Path]:
    """make_sysfs({id: cpulist}, ...) writes a fake tree and returns its sysfs mount point."""

    def make(cells: Mapping[int, str], **kwargs) -> Path:
        write_node_tree(tmp_path, cells, **kwargs)
        return tmp_path / "sys"

    return make


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
        assert plugin.ready.wait(10) or failures, "plugin did not start serving"
        if failures:
            raise failures[0]
        yield plugin
    finally:
        plugin.stop("test done")
        thread.join(10)
    assert not thread.is_alive(), "plugin.run() did not return after stop()"
    if failures:
        raise failures[0]
