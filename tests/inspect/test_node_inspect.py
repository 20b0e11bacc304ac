"""`numa-align inspect` on a fake node: PodResources over a real unix socket, checkpoints, sysfs."""

from __future__ import annotations

import json
import socket as sockets

from numa_align.inspect import main

from tests.fakesysfs import write_node_tree
from tests.inspect.conftest import MIB64, PINNED_UID, SHARED_UID


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_report_places_each_container(node, capsys):
    code, out, err = run(capsys, *node.args, "--format", "json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["numa_nodes"] == {"0": "0-1", "1": "2-3"}
    assert report["cpu_manager"] == {"policy": "static", "shared_cpus": "0,3"}
    assert report["memory_manager"] == {"policy": "Static", "managed": True, "note": None}
    assert report["allocatable"]["cpus"] == {"0": "1", "1": "2-3"}
    assert (report["allocatable"]["served"], report["allocatable"]["note"]) == (True, None)
    assert report["allocatable"]["devices"]["numa-align/numa-1"] == {"count": 2, "numa": [1]}
    assert [(p["namespace"], p["name"], p["uid"]) for p in report["pods"]] == [
        ("e2e", "burstable", SHARED_UID), ("e2e", "pinned-1", PINNED_UID)]
    pinned = report["pods"][1]["containers"][0]
    assert pinned == {
        "name": "app",
        "exclusive_cpus": "2",
        "cpu_numa": [1],
        "memory": [{"type": "memory", "size": MIB64, "numa": [1]}],
        "memory_numa": [1],
        "memory_affinity": "managed",
        "numa_align": [{"resource": "numa-align/numa-1", "ids": ["numa-1-0"], "numa": [1]}],
        "devices": [],
        "state": {"cpus": "2", "memory_numa": [1]},
    }
    shared = report["pods"][0]["containers"][0]
    assert (shared["exclusive_cpus"], shared["cpu_numa"], shared["state"]) == (
        "", [], {"cpus": None, "memory_numa": []})
    assert node.double.calls["List"] == 1 and node.double.calls["GetAllocatableResources"] == 1


def test_table_has_a_row_per_container(node, capsys):
    code, out, _ = run(capsys, *node.args)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "cpu manager static, shared pool 0,3; memory manager Static"
    assert lines[1] == "numa 0: cpus 0-1, allocatable cpus 1, devices numa-align/numa-0 x2"
    assert lines[2] == "numa 1: cpus 2-3, allocatable cpus 2-3, devices numa-align/numa-1 x2"
    rows = [line.split() for line in lines[4:]]
    assert rows[0] == ["POD", "CONTAINER", "CPUS", "CPU-NUMA", "MEM-NUMA", "NUMA-ALIGN", "STATE"]
    assert rows[1] == ["e2e/burstable", "app", "-", "-", "-", "-", "ok"]
    assert rows[2] == ["e2e/pinned-1", "app", "2", "1", "1", "numa-1x1", "ok"]


def test_table_flags_checkpoints_that_disagree_with_the_api(node, capsys):
    node.write_state({PINNED_UID: {"app": "3"}},
                     {PINNED_UID: {"app": [{"numaAffinity": [0], "type": "memory", "size": MIB64}]}})
    _, out, _ = run(capsys, *node.args)
    assert out.splitlines()[-1].endswith("differs: cpus 3 mems 0")


def test_pod_without_log_dir_has_no_uid(node, capsys):
    for entry in (node.root / "pods").iterdir():
        if entry.name.startswith("e2e_pinned-1_"):
            (entry / "app").rmdir()
            entry.rmdir()
    _, out, _ = run(capsys, *node.args, "--format", "json")
    pinned = json.loads(out)["pods"][1]
    assert (pinned["uid"], pinned["containers"][0]["state"]) == (None, None)


def test_missing_socket_names_it(node, capsys):
    code, out, err = run(capsys, *node.args, "--socket", str(node.root / "absent.sock"))
    assert (code, out) == (1, "")
    absent = node.root / "absent.sock"
    assert err == f"numa-align inspect: no socket at {absent}: is the kubelet running on this node?\n"


def test_missing_cpu_checkpoint_names_it(node, capsys):
    (node.root / "kubelet" / "cpu_manager_state").unlink()
    code, _, err = run(capsys, *node.args)
    assert code == 1
    assert "cpu_manager_state: No such file or directory (the kubelet writes it at start)" in err


def test_broken_checkpoint_names_it(node, capsys):
    (node.root / "kubelet" / "cpu_manager_state").write_text('{"entries": {}}')
    code, _, err = run(capsys, *node.args)
    assert code == 1 and "cpu_manager_state has no policyName" in err


def test_dead_socket_reports_the_grpc_status(node, capsys, tmp_path):
    dead = tmp_path / "dead.sock"
    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(str(dead))
    listener.close()
    code, _, err = run(capsys, *node.args, "--socket", str(dead))
    assert code == 1 and f"PodResources API at {dead}: UNAVAILABLE" in err


def test_a_memory_only_node_is_listed_as_such(node, capsys, tmp_path):
    write_node_tree(tmp_path / "sys", {0: "0-1", 1: "2-3", 2: ""})
    code, out, _ = run(capsys, *node.args)
    assert code == 0
    assert "numa 2: memory-only (no online CPU, so no numa-align device)" in out.splitlines()
    code, out, _ = run(capsys, *node.args, "--format", "json")
    assert json.loads(out)["memory_only_nodes"] == [2]
