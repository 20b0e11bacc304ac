"""`numa-align` as a process: exit codes, one-line errors, signals, `discover`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest

from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, serve_pod_resources
from tests.plugin.fakekube import FakeKube, kubeconfig_text, serve_kube
from tests.plugin.test_protocol import TWO_NODES, resources


def numa_align(*args: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NUMA_")} | env
    return subprocess.Popen(
        [sys.executable, "-m", "numa_align", *args],
        env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_ends_streams_removes_own_sockets_and_exits_0(signum, make_sysfs, kubelet):
    env = {"NUMA_SYSFS_ROOT": str(make_sysfs(TWO_NODES)), "NUMA_SOCKET_DIR": str(kubelet.socket_dir),
           "NUMA_METRICS_ADDR": "", "NUMA_CAPACITY": "2"}
    process = numa_align(env=env)
    try:
        assert kubelet.wait_connected(resources(TWO_NODES), timeout=30), kubelet.errors
        clients = [kubelet.client(name) for name in resources(TWO_NODES)]
        process.send_signal(signum)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert f"received {signum.name}" in err
    assert [client.stream_ended() for client in clients] == [grpc.StatusCode.OK] * 2
    left = sorted(p.name for p in kubelet.socket_dir.iterdir())
    assert left == ["kubelet.sock", "kubelet_internal_checkpoint"]


def _invalid_cases(tmp: Path, socket_dir: Path, sysfs: Path) -> list[tuple[dict[str, str], list[str], str]]:
    a_file = tmp / "not-a-dir"
    a_file.write_text("")
    bad_kubeconfig = tmp / "bad-kubeconfig"
    bad_kubeconfig.write_text("current-context: gone\n")
    nrt_on = {"NUMA_ALIGN_NRT": "true", "NUMA_ALIGN_NODE_NAME": "worker-1"}
    return [
        ({"NUMA_CAPACITY": "0"}, [], "NUMA_CAPACITY"),
        ({"NUMA_CAPACITY": "-1"}, [], "NUMA_CAPACITY"),
        ({"NUMA_CAPACITY": "abc"}, [], "NUMA_CAPACITY"),
        ({"NUMA_CAPACITY": ""}, [], "NUMA_CAPACITY"),
        ({}, ["--capacity", "0"], "--capacity"),
        ({"NUMA_RESERVED_CPUS": "64"}, [], "NUMA_RESERVED_CPUS"),
        ({"NUMA_RESERVED_CPUS": "3-1"}, [], "NUMA_RESERVED_CPUS"),
        ({"NUMA_RESERVED_CPUS": "x"}, [], "NUMA_RESERVED_CPUS"),
        ({"NUMA_SOCKET_DIR": str(a_file)}, [], "NUMA_SOCKET_DIR"),
        ({"NUMA_SOCKET_DIR": str(tmp / "missing")}, [], "NUMA_SOCKET_DIR"),
        ({"NUMA_SOCKET_DIR": "relative/dir"}, [], "NUMA_SOCKET_DIR"),
        ({"NUMA_SYSFS_ROOT": str(tmp / "nosys")}, [], "NUMA_SYSFS_ROOT"),
        ({"NUMA_METRICS_ADDR": "9201"}, [], "NUMA_METRICS_ADDR"),
        ({"NUMA_METRICS_ADDR": "host:99999"}, [], "NUMA_METRICS_ADDR"),
        ({"NUMA_LOG_LEVEL": "loud"}, [], "NUMA_LOG_LEVEL"),
        ({"NUMA_RESCAN_INTERVAL": "0"}, [], "NUMA_RESCAN_INTERVAL"),
        ({}, ["--no-such-flag"], "--no-such-flag"),
        ({"NUMA_ALIGN_NRT": "maybe"}, [], "NUMA_ALIGN_NRT"),
        (nrt_on | {"NUMA_ALIGN_KUBECONFIG": str(bad_kubeconfig)}, [], "NUMA_ALIGN_KUBECONFIG"),
        (nrt_on, ["--kubeconfig", str(bad_kubeconfig)], "--kubeconfig"),
    ]


def test_every_invalid_value_exits_2_with_one_line_before_any_socket(tmp_path, socket_dir, make_sysfs):
    sysfs = make_sysfs(TWO_NODES)
    base = {"NUMA_SYSFS_ROOT": str(sysfs), "NUMA_SOCKET_DIR": str(socket_dir), "NUMA_METRICS_ADDR": ""}
    for env, args, variable in _invalid_cases(tmp_path, socket_dir, sysfs):
        process = numa_align(*args, env=base | env)
        out, err = process.communicate(timeout=30)
        case = f"{env} {args}"
        assert process.returncode == 2, f"{case}: exit {process.returncode}: {err}"
        assert out == "", case
        assert len(err.strip().splitlines()) == 1 and variable in err, f"{case}: {err!r}"
        assert list(socket_dir.iterdir()) == [], case


def test_discover_prints_nodes_and_devices_as_json(make_sysfs):
    sysfs = make_sysfs({0: "0-3", 2: "4-7"}, memory_kib={0: 1024, 2: 2048})
    env = {"NUMA_SYSFS_ROOT": str(sysfs), "NUMA_CAPACITY": "cpus", "NUMA_RESERVED_CPUS": "0,4-5"}
    out, err = numa_align("discover", env=env).communicate(timeout=30)
    report = json.loads(out)
    assert report["capacity"] == "cpus" and report["sysfs_root"] == str(sysfs)
    assert [(n["id"], n["cpus"], n["memory"], n["resource"], n["devices"]) for n in report["nodes"]] == [
        (0, "0-3", 1024 * 1024, "numa-align/numa-0", 3),
        (2, "4-7", 2048 * 1024, "numa-align/numa-2", 2),
    ]
    assert report["nodes"][0]["distances"] == [10, 20]


def test_inspect_dispatches_to_the_inspector_with_the_remaining_arguments():
    process = numa_align("inspect", "--help", env={})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "--state-dir" in out and "--pod-log-dir" in out  # the inspector's parser, not ours


def test_discover_shows_memory_only_nodes_without_a_resource(make_sysfs):
    sysfs = make_sysfs({0: "0-3", 1: "4-7", 250: ""}, threads_per_core=2, offline_cpus="7",
                       memory_kib={0: 1024, 1: 1024, 250: 8192})
    out, err = numa_align("discover", env={"NUMA_SYSFS_ROOT": str(sysfs), "NUMA_CAPACITY": "cpus"}).communicate(
        timeout=30)
    report = json.loads(out)
    assert report["threads_per_core"] == 2
    rows = [(n["id"], n["cpus"], n["offline_cpus"], n["memory_only"], n["resource"], n["devices"])
            for n in report["nodes"]]
    assert rows == [
        (0, "0-3", "", False, "numa-align/numa-0", 4),
        (1, "4-6", "7", False, "numa-align/numa-1", 3),
        (250, "", "", True, None, 0),
    ]


def test_discover_refuses_a_host_without_an_online_cpu_node(make_sysfs):
    sysfs = make_sysfs({0: "0-1", 1: ""}, offline_cpus="1")
    (sysfs / "devices/system/cpu/online").write_text("\n")
    process = numa_align("discover", env={"NUMA_SYSFS_ROOT": str(sysfs)})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2 and out == ""
    assert "lists no node with an online CPU (online nodes: 0, 1)" in err


def test_serve_with_nrt_on_publishes_the_nodes_object_and_stops_on_sigterm(make_sysfs, socket_dir, tmp_path):
    fake = FakeKube(token="t")
    uid = fake.add_node("worker-1")
    kubelet_dir = Path(tempfile.mkdtemp(prefix="na-pr-", dir="/tmp"))  # unix socket paths must stay short
    try:
        with serve_kube(fake) as url, serve_pod_resources(kubelet_dir / "kubelet.sock") as pod_resources:
            pod_resources.set_allocatable(range(4))
            pod_resources.set_pods([PodAlloc("numa", "pinned", [ContainerAlloc("app", cpus=[2, 3])])])
            (tmp_path / "kubeconfig").write_text(kubeconfig_text(url, {"token": "t"}))
            env = {"NUMA_SYSFS_ROOT": str(make_sysfs(TWO_NODES)), "NUMA_SOCKET_DIR": str(socket_dir),
                   "NUMA_METRICS_ADDR": "", "NUMA_ALIGN_NRT": "true", "NUMA_ALIGN_NODE_NAME": "worker-1",
                   "NUMA_ALIGN_KUBECONFIG": str(tmp_path / "kubeconfig"), "NUMA_ALIGN_POLL_INTERVAL": "0.1",
                   "NUMA_ALIGN_POD_RESOURCES_SOCKET": str(kubelet_dir / "kubelet.sock")}
            process = numa_align(env=env)
            try:
                deadline = time.monotonic() + 30
                while "worker-1" not in fake.nrts and time.monotonic() < deadline and process.poll() is None:
                    time.sleep(0.05)
                process.send_signal(signal.SIGTERM)
                _out, err = process.communicate(timeout=30)
            finally:
                if process.poll() is None:
                    process.kill()
    finally:
        shutil.rmtree(kubelet_dir, ignore_errors=True)
    assert process.returncode == 0, err
    assert f"publishing NodeResourceTopology worker-1 to {url}" in err
    stored = fake.nrts["worker-1"]
    assert stored["metadata"]["ownerReferences"][0]["uid"] == uid
    available = {z["name"]: [r["available"] for r in z["resources"] if r["name"] == "cpu"] for z in stored["zones"]}
    assert available == {"node-0": ["2"], "node-2": ["0"]}


class _Exited(Exception):
    pass


def test_serve_ends_the_process_without_finalizing_once_it_stopped(make_sysfs, socket_dir, monkeypatch):
    """After a stop, serve leaves through os._exit: the interpreter's finalization with gRPC loaded cost an
    emulated guest seconds under load, past systemd's stop timeout. Logs are flushed first."""
    from numa_align import cli
    from numa_align.running import Plugin

    monkeypatch.setenv("NUMA_SYSFS_ROOT", str(make_sysfs(TWO_NODES)))
    monkeypatch.setenv("NUMA_SOCKET_DIR", str(socket_dir))
    monkeypatch.setenv("NUMA_METRICS_ADDR", "")
    monkeypatch.setattr(Plugin, "run", lambda self: None)  # stopped at once
    flushed: list[str] = []
    monkeypatch.setattr(cli.logging, "shutdown", lambda: flushed.append("logging"))
    codes: list[int] = []

    def exit_now(code: int) -> None:
        codes.append(code)
        raise _Exited

    monkeypatch.setattr(cli.os, "_exit", exit_now)
    with pytest.raises(_Exited):
        cli.main(["serve"])
    assert codes == [0] and flushed == ["logging"]


def test_serve_sets_the_guard_metric_from_the_record_of_this_boot(make_sysfs, socket_dir, tmp_path, monkeypatch):
    """The kubelet guard's moves at this boot are gauges from the first poll (NRT publishing on or off)."""
    from numa_align import cli
    from numa_align.guard_report import BOOT_ID
    from numa_align.running import Plugin

    moved = [{"file": f"/var/lib/kubelet/{name}", "aside": f"/var/lib/kubelet/{name}.mismatch-x", "reason": "r"}
             for name in ("cpu_manager_state", "memory_manager_state")]
    record = tmp_path / "kubelet-guard.json"
    record.write_text(json.dumps({"bootId": BOOT_ID.read_text().strip(), "moved": moved}))
    for variable, value in (("NUMA_SYSFS_ROOT", str(make_sysfs(TWO_NODES))), ("NUMA_SOCKET_DIR", str(socket_dir)),
                            ("NUMA_METRICS_ADDR", "127.0.0.1:0"), ("NUMA_ALIGN_GUARD_RECORD", str(record))):
        monkeypatch.setenv(variable, value)
    seen: dict[str, float | None] = {}

    def run(plugin: Plugin) -> None:
        sample = plugin.metrics.registry.get_sample_value
        for _ in range(100):  # the publisher's first poll reads the record, in its own thread
            if sample("numa_align_kubelet_checkpoint_set_aside", {"file": moved[-1]["file"]}) is not None:
                break
            time.sleep(0.05)
        for entry in moved + [{"file": "/var/lib/kubelet/other"}]:
            seen[entry["file"]] = plugin.metrics.registry.get_sample_value(
                "numa_align_kubelet_checkpoint_set_aside", {"file": entry["file"]})

    def exit_now(code: int) -> None:
        raise _Exited

    monkeypatch.setattr(Plugin, "run", run)
    monkeypatch.setattr(cli.os, "_exit", exit_now)
    with pytest.raises(_Exited):
        cli.main(["serve"])
    assert seen == {"/var/lib/kubelet/cpu_manager_state": 1.0, "/var/lib/kubelet/memory_manager_state": 1.0,
                    "/var/lib/kubelet/other": None}
