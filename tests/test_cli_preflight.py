"""`numalab preflight`: on captured trees (--sysfs-root) and through pyinfra on this machine (@local, --dry)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numalab.cli import main
from tests.fakesysfs import GIB_KIB, write_node_tree

REPO = Path(__file__).resolve().parents[1]


def captured(tmp_path: Path, cells: dict[int, str], cgroup: int = 2, swap: bool = False, **tree) -> Path:
    """A captured host: <root>/sys with the node tree and fs/cgroup, <root>/proc/swaps."""
    sysfs = write_node_tree(tmp_path / "sys", cells, **tree)
    (sysfs / "fs/cgroup").mkdir(parents=True)
    if cgroup == 2:
        (sysfs / "fs/cgroup/cgroup.controllers").write_text("cpuset cpu memory\n")
    (tmp_path / "proc").mkdir()
    swaps = "Filename Type Size Used Priority\n" + ("/swapfile file 1024 0 -2\n" if swap else "")
    (tmp_path / "proc/swaps").write_text(swaps)
    return sysfs


def run_json(capsys, *argv: str) -> tuple[int, list[dict]]:
    code = main(["preflight", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_an_smt_host_with_a_memory_only_node_passes_and_shows_its_shape(tmp_path, capsys) -> None:
    sysfs = captured(tmp_path, {0: "0-7", 1: "8-15", 250: ""}, threads_per_core=2, offline_cpus="15",
                     memory_kib={0: 8 * GIB_KIB, 1: 8 * GIB_KIB, 250: 16 * GIB_KIB},
                     hugepages={0: {2048: 64}, 1: {2048: 0}, 250: {2048: 0}}, swap=True)
    code, [report] = run_json(capsys, "--sysfs-root", str(sysfs))
    assert code == 0 and report["ok"] and report["refused"] is None
    assert report["cgroup_version"] == 2 and report["swap_active"] is True
    assert report["threads_per_core"] == 2 and report["offline_cpus"] == "15"
    assert report["memory_only_nodes"] == [250] and report["hugepages"] == {"0": {"2Mi": 64}}
    assert "reserved-cpus=0-1" in report["kubelet_args"]
    assert main(["preflight", "--sysfs-root", str(sysfs)]) == 0
    text = capsys.readouterr().out
    assert ": ok  kubelet v1.36.3  cgroup v2  swap on (base turns it off)" in text
    assert "memory-only nodes 250" in text and "  --reserved-cpus=0-1" in text


def test_a_cgroup_v1_host_is_refused_and_the_exit_code_says_so(tmp_path, capsys) -> None:
    sysfs = captured(tmp_path, {0: "0-3", 1: "4-7"}, cgroup=1)
    code, [report] = run_json(capsys, "--sysfs-root", str(sysfs))
    assert code == 1 and not report["ok"] and report["kubelet_args"] is None
    assert "host.cgroup: this host runs cgroup v1 and kubelet 1.36 refuses to start on it" in report["refused"]
    code, [older] = run_json(capsys, "--sysfs-root", str(sysfs), "--kubelet-version", "v1.34.2")
    assert code == 0 and older["ok"]


def test_an_unreadable_tree_is_refused_naming_the_file(tmp_path, capsys) -> None:
    sysfs = captured(tmp_path, {0: "0-3"})
    (sysfs / "devices/system/cpu/online").unlink()
    code, [report] = run_json(capsys, "--sysfs-root", str(sysfs))
    assert code == 1 and "devices/system/cpu/online does not exist" in report["refused"]


def test_settings_and_allow_newer(tmp_path, capsys) -> None:
    sysfs = captured(tmp_path, {0: "0-3", 1: "4-7"})
    settings = tmp_path / "settings.yaml"
    settings.write_text("reserved-cpus: '0,9'\n")
    code, [report] = run_json(capsys, "--sysfs-root", str(sysfs), "--settings", str(settings))
    assert code == 1 and "settings.reserved-cpus: cpu(s) 9 are not on this node" in report["refused"]
    code, [newer] = run_json(capsys, "--sysfs-root", str(sysfs), "--kubelet-version", "v1.99.0")
    assert code == 1 and "--allow-newer" in newer["refused"]
    code, [allowed] = run_json(capsys, "--sysfs-root", str(sysfs), "--kubelet-version", "v1.99.0", "--allow-newer")
    assert code == 0 and allowed["kubelet_version"] == "v1.99.0"


def _inventory(tmp_path: Path, version: str, settings: dict | None = None) -> Path:
    data = {"k8s_distribution": "rke2", "rke2_version": version, "rke2_install": "preinstalled",
            "k8s_server_runs_pods": True, "k8s_address": "127.0.0.1", "k8s_state_dir": str(tmp_path / "state"),
            "k8s_node_name": "this-machine", "kubelet_settings": settings or {}}
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"rke2_servers = [('@local', {data!r})]\n")
    return inventory


def test_an_inventory_is_judged_through_pyinfra_facts_only(tmp_path, capsys) -> None:
    code, [report] = run_json(capsys, str(_inventory(tmp_path, "v1.34.2+rke2r1")))
    assert code == 0 and report["host"] == "this-machine" and report["kubelet_version"] == "v1.34.2"
    assert report["numa_nodes"] and report["cgroup_version"] in (1, 2)
    bad = _inventory(tmp_path, "v1.34.2+rke2r1", {"reserved-cpus": "100000"})
    code, [refused] = run_json(capsys, str(bad))
    assert code == 1 and refused["refused"].startswith("this-machine: settings.reserved-cpus: cpu(s) 100000")


def test_the_cluster_deploy_refuses_such_a_host_before_any_change(tmp_path) -> None:
    inventory = _inventory(tmp_path, "v1.34.2+rke2r1", {"reserved-cpus": "100000"})
    done = subprocess.run([sys.executable, "-m", "pyinfra", "-y", "--dry", str(inventory), "deploys/cluster.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "preflight: this-machine: settings.reserved-cpus: cpu(s) 100000" in out
    assert "nothing was changed on any host" in out
    assert "Set the hostname" not in out  # no stage after preflight was even prepared


def test_an_inventory_that_is_not_a_file_is_bad_input(tmp_path, capsys) -> None:
    assert main(["preflight", str(tmp_path / "missing.py")]) == 2
    assert "is not a file" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_this_machine_is_judged_without_error(fmt, capsys) -> None:
    assert main(["preflight", "--format", fmt]) in (0, 1)
    assert capsys.readouterr().out.strip()
