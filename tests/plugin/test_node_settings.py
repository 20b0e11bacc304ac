"""Per-node settings of a DaemonSet: each pod takes its own node's entry of the one file, or refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from numa_align.node_settings import VARIABLE, node_environment
from numa_align.settings import SettingsError

from tests.plugin.test_cli import numa_align

NODES = {"worker-1": {"NUMA_RESERVED_CPUS": "0", "NUMA_ALIGN_TOPOLOGY_POLICY": "single-numa-node"},
         "worker-3": {"NUMA_RESERVED_CPUS": "0-1", "NUMA_ALIGN_TOPOLOGY_POLICY": "restricted"}}


def settings_file(tmp_path: Path, nodes: object = NODES) -> Path:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(nodes))
    return path


def test_each_node_gets_its_own_entry_over_the_environment(tmp_path: Path) -> None:
    path = settings_file(tmp_path)
    env = {VARIABLE: str(path), "NODE_NAME": "worker-3", "NUMA_SOCKET_DIR": "/dp", "NUMA_RESERVED_CPUS": "7"}
    assert node_environment(env) == {**env, "NUMA_RESERVED_CPUS": "0-1", "NUMA_ALIGN_TOPOLOGY_POLICY": "restricted"}
    env["NUMA_ALIGN_NODE_NAME"] = "worker-1"  # the explicit node name comes before NODE_NAME
    assert node_environment(env)["NUMA_RESERVED_CPUS"] == "0"


def test_without_the_variable_the_environment_is_used_as_it_is() -> None:
    assert node_environment({"NUMA_RESERVED_CPUS": "3", VARIABLE: ""}) == {"NUMA_RESERVED_CPUS": "3", VARIABLE: ""}


@pytest.mark.parametrize(("nodes", "node", "says"), [
    (NODES, "worker-9", "has no settings for node worker-9 (it has: worker-1, worker-3)"),
    (NODES, "", "neither NUMA_ALIGN_NODE_NAME nor NODE_NAME"),
    (["worker-1"], "worker-1", "is not a JSON object"),
    ({"worker-1": {"PATH": "/bin"}}, "worker-1", "not a mapping of NUMA_* variables"),
    ({"worker-1": {"NUMA_CAPACITY": 4}}, "worker-1", "not a mapping of NUMA_* variables"),
])
def test_a_node_without_a_proper_entry_is_refused_naming_the_file(tmp_path: Path, nodes, node, says) -> None:
    path = settings_file(tmp_path, nodes)
    with pytest.raises(SettingsError) as raised:
        node_environment({VARIABLE: str(path), "NODE_NAME": node})
    assert str(raised.value).startswith(f"{VARIABLE}: ") and says in str(raised.value)


def test_an_unreadable_or_broken_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        node_environment({VARIABLE: str(tmp_path / "absent.json"), "NODE_NAME": "worker-1"})
    broken = tmp_path / "broken.json"
    broken.write_text("{worker-1: ")
    with pytest.raises(SettingsError, match="is not JSON"):
        node_environment({VARIABLE: str(broken), "NODE_NAME": "worker-1"})


def test_the_process_runs_with_its_nodes_settings_and_exits_2_without_them(tmp_path: Path, make_sysfs) -> None:
    sysfs = make_sysfs({0: "0-3", 2: "4-7"})
    path = settings_file(tmp_path, {"worker-1": {"NUMA_RESERVED_CPUS": "0,4-5", "NUMA_CAPACITY": "cpus"}})
    env = {"NUMA_SYSFS_ROOT": str(sysfs), VARIABLE: str(path), "NODE_NAME": "worker-1", "NUMA_CAPACITY": "100"}
    process = numa_align("discover", env=env)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert [node["devices"] for node in json.loads(out)["nodes"]] == [3, 2]  # worker-1's reservation and capacity
    process = numa_align("discover", env={**env, "NODE_NAME": "worker-2"})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2 and out == ""
    assert err.strip() == (f"numa-align: {VARIABLE}: {path} has no settings for node worker-2 (it has: worker-1); "
                           "run numa-lab's deploy, which writes an entry for every node it labels for numa-align")
