"""The kubelet's boot guard on a fake root: it moves a checkpoint aside only after a reboot, only when the
checkpoint no longer fits the machine, only with no container alive; it always exits 0; and the archive the
node runs holds everything it needs (run with `python -S`: the standard library and the archive only)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from numa_align import guard_report

from numalab import checkpoint_guard
from numalab.checkpoint_guard import guard, main
from numalab.deploy.checkpoints import guard_archive, guard_modules
from numalab.model.kubelet_checkpoints import CPU_MANAGER_STATE, MEMORY_MANAGER_STATE
from tests.fakesysfs import write_node_tree
from tests.model.test_kubelet_checkpoints import FRESH, cpu_state

OLD_BOOT, NEW_BOOT = "0f0e8a2c-5a8e-4f5b-9d36-0d3b1b7c0001", "7c1d2e3f-1111-4a4a-8b8b-0d3b1b7c0002"


def node_root(root: Path, *, boot: str = NEW_BOOT, saved: str | None = OLD_BOOT, offline: str = "",
              cpu: str | None = None, memory: str | None = None) -> Path:
    """A node's root: two 2 GiB cells with CPUs 0-1 and 2-3 (`offline` of them offline), its boot id, the boot
    id the guard saved at the kubelet's last start, the checkpoints (None: absent), an empty kubepods.slice."""
    write_node_tree(root / "sys", {0: "0-1", 1: "2-3"}, offline_cpus=offline)
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text(boot + "\n")
    if saved is not None:
        (root / "var/lib/numa-lab").mkdir(parents=True)
        (root / "var/lib/numa-lab/kubelet-boot-id").write_text(saved + "\n")
    (root / "var/lib/kubelet").mkdir(parents=True)
    for path, text in ((CPU_MANAGER_STATE, cpu), (MEMORY_MANAGER_STATE, memory)):
        if text is not None:
            (root / path.lstrip("/")).write_text(text)
    pods = root / "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice"
    pods.mkdir(parents=True)
    (pods / "cgroup.procs").write_text("")
    (root / "sys/fs/cgroup/kubepods.slice/cgroup.procs").write_text("")
    return root


def kubelet_files(root: Path) -> list[str]:
    return sorted(path.name for path in (root / "var/lib/kubelet").iterdir())


def saved_boot(root: Path) -> str:
    return (root / "var/lib/numa-lab/kubelet-boot-id").read_text().strip()


def record(root: Path) -> dict | None:
    """The guard's record for numa-align, or None when it wrote none."""
    path = root / checkpoint_guard.RECORD.lstrip("/")
    return json.loads(path.read_text()) if path.exists() else None


CPU3_OFFLINE = {"offline": "3", "cpu": cpu_state(), "memory": FRESH}


def test_after_a_reboot_a_checkpoint_that_no_longer_fits_is_moved_aside(tmp_path: Path) -> None:
    root = node_root(tmp_path, **CPU3_OFFLINE)
    said = guard(str(root))
    assert kubelet_files(root) == [f"cpu_manager_state.mismatch-{NEW_BOOT}", "memory_manager_state"]
    assert (root / f"var/lib/kubelet/cpu_manager_state.mismatch-{NEW_BOOT}").read_text() == cpu_state()
    assert said == [f"moved {CPU_MANAGER_STATE} to {CPU_MANAGER_STATE}.mismatch-{NEW_BOOT} (boot id changed, no "
                    "container alive): it holds CPUs 0-3 but the machine has 0-2 online (no longer there: 3)"]
    assert saved_boot(root) == NEW_BOOT
    assert guard(str(root)) == [] and len(kubelet_files(root)) == 2  # a second start in this boot: nothing


def test_a_move_is_recorded_for_numa_align_to_show(tmp_path: Path) -> None:
    """numa-align turns the record into a metric and an Event (the guard has no API server to tell)."""
    root = node_root(tmp_path, **CPU3_OFFLINE)
    guard(str(root))
    assert record(root) == {"bootId": NEW_BOOT, "moved": [{
        "file": CPU_MANAGER_STATE, "aside": f"{CPU_MANAGER_STATE}.mismatch-{NEW_BOOT}",
        "reason": "it holds CPUs 0-3 but the machine has 0-2 online (no longer there: 3)"}]}
    assert sorted(path.name for path in (root / "var/lib/numa-lab").iterdir()) == [
        "kubelet-boot-id", "kubelet-guard.json"]  # written through a temporary file, renamed: none left


@pytest.mark.parametrize("case", ["same boot", "no saved boot id", "checkpoints fit", "a container alive"])
def test_no_record_when_nothing_moved(tmp_path: Path, case: str) -> None:
    root = node_root(tmp_path, saved={"same boot": NEW_BOOT, "no saved boot id": None}.get(case, OLD_BOOT),
                     **(CPU3_OFFLINE if case != "checkpoints fit" else {"cpu": cpu_state(), "memory": FRESH}))
    if case == "a container alive":
        (root / "run/containerd/io.containerd.runtime.v2.task/k8s.io/4f2a").mkdir(parents=True)
    guard(str(root))
    assert record(root) is None


def test_numa_align_reads_the_record_and_the_boot_id_where_the_guard_writes_them() -> None:
    """The plugin is its own distribution and cannot import numalab: the paths are the same fact twice."""
    assert str(guard_report.RECORD) == checkpoint_guard.RECORD
    assert str(guard_report.BOOT_ID) == checkpoint_guard.BOOT_ID


def test_a_memory_checkpoint_of_a_shrunk_cell_is_moved_aside(tmp_path: Path) -> None:
    root = node_root(tmp_path, cpu=cpu_state(), memory=FRESH)
    write_node_tree(root / "sys", {0: "0-1", 1: "2-3"}, memory_kib={0: 2 * 2**20, 1: 1792 * 1024})
    said = guard(str(root))
    assert kubelet_files(root) == ["cpu_manager_state", f"memory_manager_state.mismatch-{NEW_BOOT}"]
    assert said[0].endswith("NUMA node 1 memory: total 2Gi in it, 1792Mi on the machine")


def test_nothing_moves_within_the_same_boot(tmp_path: Path) -> None:
    root = node_root(tmp_path, saved=NEW_BOOT, **CPU3_OFFLINE)
    assert guard(str(root)) == [] and kubelet_files(root) == ["cpu_manager_state", "memory_manager_state"]


def test_with_no_saved_boot_id_it_only_saves_this_one(tmp_path: Path) -> None:
    """The first start under the guard: it cannot tell whether the kubelet already ran in this boot."""
    root = node_root(tmp_path, saved=None, **CPU3_OFFLINE)
    assert guard(str(root)) == [] and kubelet_files(root) == ["cpu_manager_state", "memory_manager_state"]
    assert saved_boot(root) == NEW_BOOT


def test_a_first_boot_with_nothing_exits_0_saying_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = node_root(tmp_path, saved=None)
    (root / "var/lib/kubelet").rmdir()
    assert main(["--root", str(root)]) == 0
    assert capsys.readouterr().err == "" and saved_boot(root) == NEW_BOOT


def test_checkpoints_that_fit_stay_and_the_boot_is_saved(tmp_path: Path) -> None:
    root = node_root(tmp_path, cpu=cpu_state(), memory=FRESH)
    assert guard(str(root)) == [] and kubelet_files(root) == ["cpu_manager_state", "memory_manager_state"]
    assert saved_boot(root) == NEW_BOOT


@pytest.mark.parametrize("alive", [
    "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-a.scope",
    "sys/fs/cgroup/kubepods/burstable/pod1/abc",  # cgroupfs driver
    "sys/fs/cgroup/memory/kubepods.slice/kubepods-pod1.slice",  # a cgroup v1 hierarchy
])
def test_a_process_in_a_pod_cgroup_leaves_everything(tmp_path: Path, alive: str) -> None:
    root = node_root(tmp_path, **CPU3_OFFLINE)
    (root / alive).mkdir(parents=True, exist_ok=True)
    (root / alive / "cgroup.procs").write_text("4242\n")
    said = guard(str(root))
    assert kubelet_files(root) == ["cpu_manager_state", "memory_manager_state"]
    assert said == [f"{CPU_MANAGER_STATE}: it holds CPUs 0-3 but the machine has 0-2 online (no longer there: 3); "
                    f"left in place: a container may be alive (a process in /{alive})"]
    assert saved_boot(root) == OLD_BOOT  # checked again at the next start of this boot
    (root / alive / "cgroup.procs").write_text("")
    assert guard(str(root))[0].startswith("moved") and saved_boot(root) == NEW_BOOT


@pytest.mark.parametrize("tasks", checkpoint_guard.CONTAINERD_TASKS)
def test_a_containerd_task_of_kubernetes_leaves_everything(tmp_path: Path, tasks: str) -> None:
    root = node_root(tmp_path, **CPU3_OFFLINE)
    (root / tasks.lstrip("/") / "4f2a").mkdir(parents=True)
    assert "left in place: a container may be alive (containerd tasks in" in guard(str(root))[0]
    assert kubelet_files(root) == ["cpu_manager_state", "memory_manager_state"]


def test_strictly_reserved_cpus_are_left_out_as_the_kubelet_does(tmp_path: Path) -> None:
    root = node_root(tmp_path, cpu=cpu_state(default="2-3"))
    assert guard(str(root), "0-1") == [] and kubelet_files(root) == ["cpu_manager_state"]
    (root / "var/lib/numa-lab/kubelet-boot-id").write_text(OLD_BOOT)
    assert "not in it: 0-1" in guard(str(root))[0]


def test_an_unreadable_checkpoint_after_a_hard_reset_is_moved_aside(tmp_path: Path) -> None:
    """A 0-byte file (written, never flushed, then the reset): the kubelet would refuse it."""
    root = node_root(tmp_path, cpu="", memory=FRESH)
    assert "the kubelet cannot read it (the file is empty)" in guard(str(root))[0]
    assert kubelet_files(root) == [f"cpu_manager_state.mismatch-{NEW_BOOT}", "memory_manager_state"]


@pytest.mark.parametrize("argv", [["--root"], ["--what"], ["--root", "/nonexistent-root"]])
def test_its_own_errors_never_keep_the_kubelet_down(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().err.startswith("numa-lab kubelet guard: unexpected error, checkpoints left as")


def test_an_unreadable_machine_leaves_the_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = node_root(tmp_path, **CPU3_OFFLINE)
    (root / "sys/devices/system/cpu/online").unlink()
    assert main(["--root", str(root)]) == 0
    assert "unexpected error" in capsys.readouterr().err and len(kubelet_files(root)) == 2
    assert saved_boot(root) == OLD_BOOT


def run_archive(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The archive as the unit runs it (components.GUARD_PYTHON): -S, so nothing outside it and the stdlib."""
    archive = tmp_path / "kubelet-guard.pyz"
    archive.write_bytes(guard_archive())
    return subprocess.run([sys.executable, "-S", "-E", str(archive), *args], capture_output=True, text=True,
                          check=True, timeout=60)


def test_the_archive_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    root = node_root(tmp_path / "root", **CPU3_OFFLINE)
    started = time.monotonic()
    done = run_archive(tmp_path, "--root", str(root))
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.startswith(f"numa-lab kubelet guard: moved {CPU_MANAGER_STATE} to"), done.stderr
    assert kubelet_files(root)[0] == f"cpu_manager_state.mismatch-{NEW_BOOT}"
    assert record(root)["moved"][0]["file"] == CPU_MANAGER_STATE
    assert took < 10, took


def test_the_archive_is_the_same_bytes_every_time_and_holds_every_module() -> None:
    import io
    import zipfile

    archive = guard_archive()
    assert archive == guard_archive()  # a second deploy uploads nothing
    names = zipfile.ZipFile(io.BytesIO(archive)).namelist()
    assert names[0] == "__main__.py" and "numalab/model/kubelet_checkpoints.py" in names
    assert len(names) == 1 + len(guard_modules())


def test_the_archive_holds_what_the_guard_imports_found_from_the_sources() -> None:
    """Late imports inside functions count; packages come with their modules; nothing else of the project."""
    modules = guard_modules()
    assert {"numalab", "numalab.model", "numalab.model.kubelet_checkpoints", "numalab.model.quantity",
            "numa_align", "numa_align.cpulist", "numa_align.sysfs"} <= set(modules)
    assert not {"numalab.deploy", "numalab.model.kubelet_state", "numa_align.nrt"} & set(modules)
