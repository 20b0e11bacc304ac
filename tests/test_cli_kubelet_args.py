import json
import subprocess
import sys

import pytest
import yaml
from numa_align.cli import main as numa_align_main

from numalab.cli import main
from tests.fakesysfs import write_node_tree


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_cell_tree(tmp_path, capsys):
    write_node_tree(tmp_path, {0: "0-1", 1: "2-3"})
    code, out, err = run(capsys, "kubelet-args", "--sysfs-root", str(tmp_path))
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "--cpu-manager-policy=static",
        "--reserved-cpus=0",
        "--memory-manager-policy=Static",
        "--reserved-memory=0:memory=1124Mi",
        "--topology-manager-policy=single-numa-node",
        "--topology-manager-scope=pod",
        "--kube-reserved=cpu=500m,memory=512Mi",
        "--system-reserved=cpu=500m,memory=512Mi",
        "--eviction-hard=imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%",
    ]


def test_four_cell_tree_with_settings_as_rke2(tmp_path, capsys):
    write_node_tree(tmp_path, {0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"}, memory_kib=1048576)
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        "topology-manager-policy: restricted\n"
        "topology-manager-scope: container\n"
        "kube-reserved: {cpu: 1, memory: 1Gi}\n"
        "system-reserved: {cpu: 1, memory: 512Mi}\n"
    )
    code, out, _ = run(
        capsys, "kubelet-args", "--sysfs-root", str(tmp_path), "--settings", str(settings), "--format", "rke2"
    )
    assert code == 0
    args = yaml.safe_load(out)["kubelet-arg"]
    assert "reserved-cpus=0-1" in args
    assert [a for a in args if a.startswith("reserved-memory")] == [
        "reserved-memory=0:memory=1Gi",
        "reserved-memory=1:memory=612Mi",
    ]
    assert "topology-manager-policy=restricted" in args and "topology-manager-scope=container" in args


def test_topology_file_as_json(tmp_path, capsys):
    topo = tmp_path / "topo.yaml"
    topo.write_text("cells:\n- {id: 0, cpus: 0-3, memory: 8Gi}\n- {id: 2, cpus: 4-7, memory: 8Gi}\n")
    code, out, _ = run(capsys, "kubelet-args", "--topology", str(topo), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["reserved_memory"] == {"0": {"memory": "1124Mi"}}
    assert data["topology"]["cells"][1] == {"id": 2, "cpus": "4-7", "memory": "8Gi"}


def test_this_machines_real_sysfs_is_read_at_its_mount_point_by_default(capsys):
    code, out, err = run(capsys, "kubelet-args", "--sysfs-root", "/sys")
    assert code == 0 and err == "" and "--topology-manager-policy=single-numa-node" in out.splitlines()
    assert run(capsys, "kubelet-args") == (code, out, err)


def test_the_tree_numa_align_reads_is_the_tree_kubelet_args_reads(tmp_path, capsys, monkeypatch):
    """--sysfs-root means what NUMA_SYSFS_ROOT means: the sysfs mount point, not the file system root."""
    sysfs = write_node_tree(tmp_path / "host-sys", {0: "0-3", 2: "4-7"}, memory_kib={0: 4194304, 2: 2097152})
    monkeypatch.setenv("NUMA_SYSFS_ROOT", str(sysfs))
    assert numa_align_main(["discover"]) == 0
    plugin_nodes = json.loads(capsys.readouterr().out)["nodes"]
    code, out, err = run(capsys, "kubelet-args", "--sysfs-root", str(sysfs), "--format", "json")
    assert code == 0, err
    cells = json.loads(out)["topology"]["cells"]
    assert [(c["id"], c["cpus"], c["memory"]) for c in cells] == [(0, "0-3", "4Gi"), (2, "4-7", "2Gi")]
    assert [(n["id"], n["cpus"]) for n in plugin_nodes] == [(c["id"], c["cpus"]) for c in cells]


def test_a_file_system_root_is_refused_naming_the_mount_point(tmp_path, capsys):
    write_node_tree(tmp_path / "sys", {0: "0-1"})
    code, out, err = run(capsys, "kubelet-args", "--sysfs-root", str(tmp_path))
    assert code == 2 and out == ""
    assert f"{tmp_path}/devices/system/node is not a directory" in err
    assert f"(expected where sysfs is mounted); did you mean --sysfs-root {tmp_path}/sys?" in err


@pytest.mark.parametrize(
    ("topology_text", "settings_text", "words"),
    [
        (
            "cells:\n- {id: 0, cpus: 0-3, memory: 8Gi}\n- {id: 1, cpus: 3-5, memory: 8Gi}\n",
            None,
            "cells[1].cpus: cpu 3 of cell 1 is also in cell 0",
        ),
        ("cells: [", None, "not valid YAML at line"),
        (
            "cells:\n- {id: 0, cpus: 0-3, memory: 8Gi}\n",
            "topology-manager-policy: strict\n",
            "settings.topology-manager-policy: 'strict' is not one of",
        ),
        (
            "cells:\n- {id: 0, cpus: 0-3, memory: 8Gi}\n",
            "reserved-memory: [{numa-node: 0, memory: 1Gi}]\n",
            "adds up to 1Gi but",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_stdout(tmp_path, capsys, topology_text, settings_text, words):
    topo = tmp_path / "topo.yaml"
    topo.write_text(topology_text)
    argv = ["kubelet-args", "--topology", str(topo)]
    if settings_text is not None:
        (tmp_path / "settings.yaml").write_text(settings_text)
        argv += ["--settings", str(tmp_path / "settings.yaml")]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err


def test_missing_files_exit_2(tmp_path, capsys):
    code, out, err = run(capsys, "kubelet-args", "--topology", str(tmp_path / "nope.yaml"))
    assert code == 2 and out == "" and "cannot read" in err
    code, out, err = run(capsys, "kubelet-args", "--sysfs-root", str(tmp_path))
    assert code == 2 and out == "" and "is not a directory" in err


def test_console_script_runs_as_a_process(tmp_path):
    write_node_tree(tmp_path, {0: "0-1", 2: "2-3"})
    done = subprocess.run(
        [sys.executable, "-m", "numalab.cli", "kubelet-args", "--sysfs-root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--reserved-memory=0:memory=1124Mi" in done.stdout
