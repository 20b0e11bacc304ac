"""Settings from environment and flags: defaults, precedence, each kind of bad value."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from numa_align import settings as settings_module
from numa_align.settings import Settings, SettingsError, read_settings
from numa_align.sysfs import NodeInfo


def test_defaults_with_a_socket_dir(socket_dir):
    s = read_settings({"NUMA_SOCKET_DIR": str(socket_dir)}, {})
    assert s == Settings(capacity=100, socket_dir=socket_dir, sysfs_root=Path("/sys"), reserved_cpus=frozenset(),
                         metrics_addr=("", 9201), log_level=logging.INFO, rescan_interval=5.0)


def test_a_flag_beats_its_variable(socket_dir):
    s = read_settings({"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_CAPACITY": "7"}, {"capacity": "cpus"})
    assert s.capacity == "cpus"
    with pytest.raises(SettingsError, match="^--capacity: "):
        read_settings({"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_CAPACITY": "7"}, {"capacity": "0"})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", None), (":9201", ("", 9201)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9300", ("::1", 9300))],
)
def test_metrics_addr_forms(raw, expected, socket_dir):
    env = {"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_METRICS_ADDR": raw}
    assert read_settings(env, {}).metrics_addr == expected


def test_reserved_cpus_parse_as_a_cpulist_and_must_exist(socket_dir):
    s = read_settings({"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_RESERVED_CPUS": "0,4-5"}, {})
    assert s.reserved_cpus == {0, 4, 5}
    nodes = [NodeInfo(0, frozenset(range(4)), 1), NodeInfo(1, frozenset(range(4, 8)), 1)]
    s.check_nodes(nodes)
    with pytest.raises(SettingsError, match=r"^NUMA_RESERVED_CPUS: CPUs 8-9 are on no online NUMA node"):
        Settings(reserved_cpus=frozenset({8, 9})).check_nodes(nodes)


def test_socket_dir_defaults_to_the_first_existing_candidate(tmp_path, monkeypatch):
    present = tmp_path / "k0s/device-plugins"
    present.mkdir(parents=True)
    monkeypatch.setattr(settings_module, "SOCKET_DIR_CANDIDATES", (tmp_path / "kubelet/dp", present))
    assert read_settings({}, {}).socket_dir == present
    monkeypatch.setattr(settings_module, "SOCKET_DIR_CANDIDATES", (tmp_path / "none",))
    with pytest.raises(SettingsError, match="^NUMA_SOCKET_DIR: not set and none of .* exists"):
        read_settings({}, {})


def test_a_socket_dir_too_long_for_unix_sockets_is_refused(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    with pytest.raises(SettingsError, match="too long for unix sockets"):
        read_settings({"NUMA_SOCKET_DIR": str(deep)}, {})


def test_discover_needs_no_socket_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(settings_module, "SOCKET_DIR_CANDIDATES", (tmp_path / "none",))
    assert read_settings({}, {}, serving=False).socket_dir is None
