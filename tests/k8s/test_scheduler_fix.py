"""numa-lab's fix for scheduler-plugins#967 in the numa-scheduler build: its sources, its cache key, its Go test.

The last test runs the fix's real `go test` (upstream's plugin against a small API server of the test: an object
created after the plugin started is filtered on; the unfixed plugin passes the node) in the wrapper module the
build writes, with the build's flags and Go caches: seconds once the Go build cache holds the scheduler build's
packages, a few minutes on a cold one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from numalab.k8s import scheduler, scheduler_fix
from numalab.k8s.errors import BinariesError
from numalab.k8s.scheduler import BINARY, go_test_scheduler_fix, scheduler_binary
from numalab.k8s.scheduler_fix import FIX_TESTS, copy_fix, fix_digest, fix_sources, go_test_fix
from numalab.k8s.versions import KUBERNETES_VERSION
from tests.k8s.fakebinaries import RecordingProgress
from tests.k8s.test_scheduler_build import FakeBuilder


def test_the_fix_is_our_go_package_and_its_test():
    assert sorted(fix_sources()) == ["nrtadopt/adopt.go", "nrtadopt/adopt_test.go", "nrtadopt/bound.go",
                                     "nrtadopt/bound_test.go", "nrtadopt/idle.go", "nrtadopt/idle_test.go",
                                     "nrtadopt/window.go", "nrtadopt/window_test.go"]
    source = fix_sources()["nrtadopt/adopt.go"].decode()
    assert "package nrtadopt" in source and "scheduler-plugins#967" in source


def test_the_fix_is_copied_into_the_wrapper_module(tmp_path):
    copy_fix(tmp_path)
    assert (tmp_path / "nrtadopt" / "adopt.go").read_bytes() == fix_sources()["nrtadopt/adopt.go"]


def sources_copy(tmp_path: Path) -> Path:
    root = tmp_path / "scheduler_go"
    shutil.copytree(scheduler_fix.GO_SOURCES, root)
    return root


def test_the_digest_follows_every_source_and_nothing_else(tmp_path):
    root = sources_copy(tmp_path)
    assert fix_digest(root) == fix_digest()
    (root / "README").write_text("not Go")
    assert fix_digest(root) == fix_digest()
    adopt = root / "nrtadopt" / "adopt.go"
    adopt.write_text(adopt.read_text() + "\n// changed\n")
    assert fix_digest(root) != fix_digest()
    (root / "nrtadopt" / "extra.go").write_text("package nrtadopt\n")
    assert len({fix_digest(root), fix_digest()}) == 2


def test_no_sources_no_build(tmp_path):
    with pytest.raises(BinariesError, match=rf"no Go sources of package nrtadopt under {tmp_path}"):
        fix_digest(tmp_path)


@pytest.fixture
def no_go(monkeypatch):
    monkeypatch.setattr(scheduler, "go_version", lambda env=None: "go1.26.8")


def test_a_changed_fix_rebuilds_and_an_unchanged_one_is_reused(tmp_path, monkeypatch, no_go):
    root = sources_copy(tmp_path)
    monkeypatch.setattr(scheduler_fix, "GO_SOURCES", root)
    builder = FakeBuilder()
    first = scheduler_binary(tmp_path / "cache", kubernetes_version="v1.36.3", builder=builder)
    assert scheduler_binary(tmp_path / "cache", kubernetes_version="v1.36.3", builder=builder) == first
    assert builder.calls == 1 and first.parent.parent.name.endswith(f"-fix{fix_digest(root)}")
    adopt = root / "nrtadopt" / "adopt.go"
    adopt.write_text(adopt.read_text() + "\n// changed\n")
    second = scheduler_binary(tmp_path / "cache", kubernetes_version="v1.36.3", builder=builder)
    assert builder.calls == 2 and second != first and second.name == BINARY


class FakeGo:
    """run_logged for `go test`: writes `lines` to the log, then fails like go when `code` is not 0."""

    def __init__(self, lines: list[str], code: int = 0) -> None:
        self.lines, self.code = lines, code

    def __call__(self, argv, cwd, env, log, progress, counted, unit):
        log.write("".join(f"{line}\n" for line in self.lines))
        if self.code:
            raise BinariesError(f"go test failed (exit {self.code}): FAIL; full output in {log.name}")


def run_fake(tmp_path, monkeypatch, go: FakeGo) -> list[str]:
    monkeypatch.setattr(scheduler_fix, "run_logged", go)
    with (tmp_path / "build.log").open("w") as log:
        log.write("earlier output\n--- PASS: TestFromAnEarlierCommand (0.00s)\n")
        return go_test_fix("go", tmp_path, {}, log, RecordingProgress())


def test_every_test_of_the_fix_must_pass(tmp_path, monkeypatch):
    passing = [f"--- PASS: {name} (0.10s)" for name in FIX_TESTS]
    assert run_fake(tmp_path, monkeypatch, FakeGo(passing + ["PASS"])) == sorted(FIX_TESTS)
    with pytest.raises(BinariesError, match=rf"did not pass {FIX_TESTS[1]}; full output in .*build\.log"):
        run_fake(tmp_path, monkeypatch, FakeGo([line for line in passing if FIX_TESTS[1] not in line] + ["PASS"]))


def test_a_failing_test_is_named(tmp_path, monkeypatch):
    failing = [f"--- FAIL: {FIX_TESTS[0]} (6.05s)", f"    --- FAIL: {FIX_TESTS[0]}/created_after_start (3.02s)"]
    with pytest.raises(BinariesError, match=rf"failed {FIX_TESTS[0]}, {FIX_TESTS[0]}/created_after_start;"):
        run_fake(tmp_path, monkeypatch, FakeGo(failing + ["FAIL"], code=1))
    with pytest.raises(BinariesError, match=r"go test failed \(exit 2\)"):  # no test ran: go's own reason
        run_fake(tmp_path, monkeypatch, FakeGo(["nrtadopt/adopt.go:1:1: expected 'package'"], code=2))


def test_the_fix_passes_its_go_test_in_the_wrapper_module(tmp_path):
    """The real `go test` (Go on PATH and the Go module proxy or a warm module cache, as the build needs)."""
    passed = go_test_scheduler_fix(KUBERNETES_VERSION, tmp_path, RecordingProgress(), os.environ)
    assert passed == sorted(FIX_TESTS)
    log = (tmp_path / "build.log").read_text()
    assert "--- PASS: TestUpstreamIgnoresObjectsMadeAfterItStarted/created_after_start" in log
    assert "adopting NodeResourceTopology" in log and 'reason="created after the cache was filled"' in log
