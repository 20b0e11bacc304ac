"""scripts/test-side-by-side, `make test`'s runner: the cluster test and the other tests as two pytest runs
at once, with one verdict. Run here against a stand-in pytest that says what it was asked and exits as told."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.lab.conftest import CLUSTER_SUBNET_OFFSETS, SUBNET_OFFSETS

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test-side-by-side"


def run(tmp_path: Path, cluster_rc: int, other_rc: int, *args: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The runner with a stand-in pytest: it prints its arguments and exits with the code for its -m side.
    The cluster side says whether the other side had started before its first deploy was done (the file
    NUMALAB_FIRST_DEPLOY_DONE names), says it is done, then waits for the other side's mark, so the test shows
    both run at once, the other only after the first deploy."""
    stand_in = tmp_path / "pytest"
    stand_in.write_text(f"""#!/bin/sh
echo "args: $*"
case "$*" in
  *"-m cluster"*) echo "cluster guests weigh ${{NUMALAB_CPU_SHARES:-libvirt's default}}"
                  echo "cluster run's niceness $(nice)"
                  [ {cluster_rc} -eq 0 ] || echo "E   AssertionError: fault cases failed"
                  sleep 1.5
                  [ -e {tmp_path}/other-started ] && echo "the other run started before the first deploy was done"
                  touch "$NUMALAB_FIRST_DEPLOY_DONE"
                  for i in $(seq 200); do [ -e {tmp_path}/other-started ] && break; sleep 0.05; done
                  [ -e {tmp_path}/other-started ] || echo "the other run had not started"
                  exit {cluster_rc} ;;
  *) [ -e {tmp_path}/prebuilt ] || echo "the other run started before the prebuild ended"
     echo "prebuild command seen by pytest: ${{NUMALAB_PREBUILD:-none}}"
     touch {tmp_path}/other-started; echo "other output line"
     echo "other guests weigh ${{NUMALAB_CPU_SHARES:-libvirt's default}}"
     echo "other run's niceness $(nice)"
     [ {other_rc} -eq 0 ] || echo "E   assert 1 == 2"; exit {other_rc} ;;
esac
""")
    stand_in.chmod(0o755)
    return subprocess.run([str(SCRIPT), str(stand_in), *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_both_runs_go_at_once_each_with_its_marker_and_the_given_arguments(tmp_path: Path) -> None:
    done = run(tmp_path, 0, 0, "--durations=15", "-k", "x")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "args: tests -m cluster --durations=15 -k x" in lines
    assert "args: tests -m not cluster --durations=15 -k x" in lines
    assert "the other run had not started" not in done.stdout
    assert "the other run started before the first deploy was done" not in done.stdout
    # the other run's output comes whole, under its heading, after the cluster run's
    heading = next(i for i, line in enumerate(lines) if "the other tests" in line)
    assert lines.index("other output line") > heading > lines.index("args: tests -m cluster --durations=15 -k x")
    assert "make test: cluster test passed, other tests passed;" in lines[-1]


def test_the_other_runs_guests_weigh_less_than_the_cluster_labs(tmp_path: Path) -> None:
    """The cluster lab's guests keep libvirt's weight; the other run's get NUMALAB_OTHER_CPU_SHARES (256 unset)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    done = run(tmp_path, 0, 0, env=base)
    assert "cluster guests weigh libvirt's default" in done.stdout
    assert "other guests weigh 256" in done.stdout
    (tmp_path / "other-started").unlink()
    done = run(tmp_path, 0, 0, env={**base, "NUMALAB_OTHER_CPU_SHARES": "512"})
    assert "cluster guests weigh libvirt's default" in done.stdout and "other guests weigh 512" in done.stdout


def test_the_other_runs_processes_are_niced_and_the_cluster_runs_not(tmp_path: Path) -> None:
    """The other run's own processes yield to the cluster test's (NUMALAB_OTHER_NICE, 10 unset): each process in the
    root CPU group weighs as much as every lab guest together."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    mine = os.nice(0)
    done = run(tmp_path, 0, 0, env=base)
    assert f"cluster run's niceness {mine}" in done.stdout
    assert f"other run's niceness {min(19, mine + 10)}" in done.stdout
    (tmp_path / "other-started").unlink()
    done = run(tmp_path, 0, 0, env={**base, "NUMALAB_OTHER_NICE": "3"})
    assert f"other run's niceness {min(19, mine + 3)}" in done.stdout, done.stdout


@pytest.mark.parametrize(("cluster_rc", "other_rc", "expected"), [
    (1, 0, 1),  # the cluster test failed
    (0, 2, 2),  # the other run was interrupted or misused
    (5, 0, 0),  # -k selected only other tests: the cluster run collected nothing
    (0, 5, 0),
    (5, 1, 1),
    (5, 5, 5),  # nothing collected at all is never green
])
def test_one_verdict_from_both_exit_codes(tmp_path: Path, cluster_rc: int, other_rc: int, expected: int) -> None:
    done = run(tmp_path, cluster_rc, other_rc)
    assert done.returncode == expected, done.stdout + done.stderr
    if expected == 5:
        assert "collected no tests" in done.stderr


def test_the_two_runs_draw_lab_subnets_from_separate_offsets() -> None:
    (a, b), (c, d) = sorted([SUBNET_OFFSETS, CLUSTER_SUBNET_OFFSETS])
    assert a <= b < c <= d <= 255


def test_a_failed_runs_error_lines_come_again_at_the_end(tmp_path: Path) -> None:
    """A CI log's tail is what is shown of it: the cluster test's error must not be buried above the other run."""
    done = run(tmp_path, 1, 1)
    lines = done.stdout.splitlines()
    assert lines[-5:-1] == ["=============== the cluster test: its errors again ===============",
                            "E   AssertionError: fault cases failed",
                            "=============== the other tests: its errors again ===============",
                            "E   assert 1 == 2"], done.stdout
    assert "FAILED" in lines[-1]
    passed = run(tmp_path, 0, 0).stdout
    assert "errors again" not in passed


def test_a_cluster_run_that_ends_before_saying_so_still_lets_the_other_run_go(tmp_path: Path) -> None:
    """A cluster test deselected or failed before its first deploy never touches the file: its end is the go."""
    stand_in = tmp_path / "pytest"
    stand_in.write_text("""#!/bin/sh
case "$*" in
  *"-m cluster"*) exit 5 ;;
  *) echo "other ran"; exit 0 ;;
esac
""")
    stand_in.chmod(0o755)
    done = subprocess.run([str(SCRIPT), str(stand_in)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "other ran" in done.stdout


def test_a_stopped_runner_stops_the_cluster_run_it_started(tmp_path: Path) -> None:
    """The cluster run is a subshell piping pytest into tee: a TERM to the runner must end that pytest too (its
    lab would otherwise stay up)."""
    marker = tmp_path / "cluster-pid"
    stand_in = tmp_path / "pytest"
    stand_in.write_text(f"""#!/bin/sh
case "$*" in
  *"-m cluster"*) echo $$ > {marker}; exec sleep 300 ;;
  *) exit 0 ;;
esac
""")
    stand_in.chmod(0o755)
    runner = subprocess.Popen([str(SCRIPT), str(stand_in)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(marker.read_text())
    runner.terminate()
    runner.wait(10)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "the cluster run's pytest outlived the runner"


def test_the_prebuild_runs_beside_the_first_deploy_and_the_other_run_waits_for_it(tmp_path: Path) -> None:
    """NUMALAB_PREBUILD starts with the cluster run and may outlast its first deploy (here 3 s against 1.5):
    the other run starts once both are done, and the command is not handed to either pytest run."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    done = run(tmp_path, 0, 0, env={**base, "NUMALAB_PREBUILD": f"sleep 3; touch {tmp_path}/prebuilt"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the other run started before the prebuild ended" not in done.stdout
    assert "the other run had not started" not in done.stdout
    assert "prebuild command seen by pytest: none" in done.stdout
    assert "make test: the other tests start (the prebuild ended" in done.stdout


def test_a_failed_prebuild_is_shown_and_the_other_run_still_goes(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    done = run(tmp_path, 0, 0, env={**base, "NUMALAB_PREBUILD": f"touch {tmp_path}/prebuilt; echo no go; exit 3"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"make test: the prebuild failed (touch {tmp_path}/prebuilt; echo no go; exit 3)" in done.stdout
    assert "no go" in done.stdout.splitlines()
    assert "other output line" in done.stdout


def test_without_a_prebuild_the_other_run_waits_only_for_the_first_deploy(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    (tmp_path / "prebuilt").touch()
    done = run(tmp_path, 0, 0, env=base)
    assert done.returncode == 0 and "prebuild" not in done.stdout.replace("prebuild command seen by pytest", "")
