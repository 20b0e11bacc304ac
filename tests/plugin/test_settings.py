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


def test_nrt_publishing_is_off_by_default_with_the_kubelets_defaults(socket_dir):
    s = read_settings({"NUMA_SOCKET_DIR": str(socket_dir)}, {})
    assert (s.nrt, s.node_name, s.kubeconfig, s.topology_policy, s.topology_scope) == (
        False, None, None, "none", "container")
    assert (s.pod_resources_socket, s.poll_interval) == (Path("/var/lib/kubelet/pod-resources/kubelet.sock"), 2.0)


def test_nrt_options_from_variables_and_flags(socket_dir, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("kind: Config\n")
    env = {"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_ALIGN_NRT": "True", "NUMA_ALIGN_NODE_NAME": "worker-1",
           "NUMA_ALIGN_KUBECONFIG": str(kubeconfig), "NUMA_ALIGN_TOPOLOGY_POLICY": "single-numa-node",
           "NUMA_ALIGN_TOPOLOGY_SCOPE": "pod", "NUMA_ALIGN_POD_RESOURCES_SOCKET": "/run/pr/kubelet.sock",
           "NUMA_ALIGN_POLL_INTERVAL": "0.5"}
    s = read_settings(env, {"topology_scope": "container", "node_name": "worker-2.lab"})
    assert (s.nrt, s.node_name, s.kubeconfig, s.topology_policy, s.topology_scope) == (
        True, "worker-2.lab", kubeconfig, "single-numa-node", "container")
    assert (s.pod_resources_socket, s.poll_interval) == (Path("/run/pr/kubelet.sock"), 0.5)


def test_the_kubelet_guards_record_is_read_where_the_guard_writes_it_unless_told(socket_dir):
    base = {"NUMA_SOCKET_DIR": str(socket_dir)}
    assert read_settings(base, {}).guard_record == Path("/var/lib/numa-lab/kubelet-guard.json")
    assert read_settings(base | {"NUMA_ALIGN_GUARD_RECORD": "/srv/guard.json"}, {}).guard_record == Path(
        "/srv/guard.json")
    assert read_settings(base, {"guard_record": "/run/g.json"}).guard_record == Path("/run/g.json")


def test_the_node_name_defaults_to_node_name_then_the_host_name(socket_dir, monkeypatch):
    monkeypatch.setattr(settings_module.socket, "gethostname", lambda: "Worker-9")
    on = {"NUMA_SOCKET_DIR": str(socket_dir), "NUMA_ALIGN_NRT": "true"}
    assert read_settings(on | {"NODE_NAME": "worker-3"}, {}).node_name == "worker-3"
    assert read_settings(on, {}).node_name == "worker-9"  # lower case, as the kubelet makes it
    monkeypatch.setattr(settings_module.socket, "gethostname", lambda: "build_host")
    with pytest.raises(SettingsError, match=r"^NUMA_ALIGN_NODE_NAME: 'build_host' \(the default, the host name\) "
                                            "is not a node name"):
        read_settings(on, {})
    assert read_settings(on | {"NUMA_ALIGN_NODE_NAME": "", "NODE_NAME": "worker-3"}, {}).node_name == "worker-3"
    empty = read_settings(on | {"NUMA_ALIGN_KUBECONFIG": " ", "NODE_NAME": "w"}, {})
    assert empty.kubeconfig is None  # empty: the service account
    assert read_settings({"NUMA_SOCKET_DIR": str(socket_dir)}, {}).node_name is None  # not needed with NRT off


@pytest.mark.parametrize(("key", "raw", "words"), [
    ("NUMA_ALIGN_NRT", "yes", "'yes' is not true or false"),
    ("--nrt", "on", "'on' is not true or false"),
    ("NUMA_ALIGN_NODE_NAME", "Worker_1", "'Worker_1' is not a node name"),
    ("NUMA_ALIGN_KUBECONFIG", "/no/such/kubeconfig", "'/no/such/kubeconfig' is not a file"),
    ("NUMA_ALIGN_TOPOLOGY_POLICY", "single-numa", "'single-numa' is not one of none, best-effort, restricted, "
                                                  "single-numa-node"),
    ("--topology-manager-scope", "Pod", "'Pod' is not one of container, pod"),
    ("NUMA_ALIGN_POD_RESOURCES_SOCKET", "kubelet.sock", "'kubelet.sock' is not an absolute path"),
    ("NUMA_ALIGN_POD_RESOURCES_SOCKET", "/" + "p" * 120, "/p+ is too long for a unix socket"),
    ("NUMA_ALIGN_POLL_INTERVAL", "0", "'0' is not a number of seconds"),
    ("--guard-record", "guard.json", "'guard.json' is not an absolute path"),
])
def test_bad_nrt_values_name_their_variable_or_flag(socket_dir, key, raw, words):
    env, flags = {"NUMA_SOCKET_DIR": str(socket_dir)}, {}
    if key.startswith("--"):
        flags = {option: raw for option, o in settings_module.OPTIONS.items() if o.flag == key}
    else:
        env[key] = raw
    with pytest.raises(SettingsError, match=f"^{key}: {words}"):
        read_settings(env, flags)
