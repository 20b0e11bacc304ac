"""etcd and kwok from the Go module proxy: their wrapper module, the cache entry, the --version check."""

from __future__ import annotations

import json

import pytest

from numalab.k8s.errors import BinariesError
from numalab.k8s.etcd import ETCD, etcd_binary
from numalab.k8s.go_commands import command_binary, tools_go, version_problem, wrapper_go_mod
from numalab.k8s.kwok import KWOK, kwok_binary
from numalab.k8s.source import go_version
from tests.k8s.fakebinaries import RecordingProgress


def fake_command(path, said: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && printf '{said}\\n'\n")
    path.chmod(0o755)
    return path


class FakeBuilder:
    def __init__(self, said: str) -> None:
        self.said, self.calls = said, 0

    def __call__(self, command, work, progress, environ):
        self.calls += 1
        fake_command(work / "bin" / command.binary, self.said)
        return {"ldflags": command.ldflags}


@pytest.fixture(scope="module")
def toolchain():
    return go_version()


def test_the_wrapper_requires_the_pin_and_imports_the_main_package_for_tidy_only():
    assert wrapper_go_mod(ETCD, "1.26.0") == (
        "module numalab.local/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v3.6.16\n")
    assert tools_go(KWOK) == '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/kwok/cmd/kwok"\n'


def test_version_lines_are_matched_whole_or_followed_by_more(tmp_path):
    etcd = fake_command(tmp_path / "etcd", "etcd Version: 3.6.16\\nGit SHA: Not provided")
    assert version_problem(etcd, ETCD) is None
    kwok = fake_command(tmp_path / "kwok", "kwok version v0.7.0 go1.26.8 (linux/amd64)")
    assert version_problem(kwok, KWOK) is None
    older = fake_command(tmp_path / "older", "kwok version v0.6.1 go1.26.8 (linux/amd64)")
    assert "expected 'kwok version v0.7.0'" in version_problem(older, KWOK)
    assert version_problem(fake_command(tmp_path / "newer", "etcd Version: 3.6.160"), ETCD) is not None


def test_built_once_then_taken_from_the_cache_by_version_and_toolchain(tmp_path, toolchain):
    builder = FakeBuilder("etcd Version: 3.6.16")
    first = etcd_binary(tmp_path, progress=RecordingProgress(), builder=builder)
    again = etcd_binary(tmp_path, progress=RecordingProgress(), builder=builder)
    assert first == again == tmp_path / f"etcd-v3.6.16-{toolchain}" / "bin" / "etcd"
    assert builder.calls == 1
    manifest = json.loads((first.parent.parent / "manifest.json").read_text())
    assert manifest["source"] == "go.etcd.io/etcd/server/v3@v3.6.16"
    assert manifest["go_version"] == toolchain


def test_a_build_printing_another_version_is_refused_and_not_cached(tmp_path, toolchain):
    with pytest.raises(BinariesError, match=r"the kwok build \(sigs\.k8s\.io/kwok@v0\.7\.0\) is refused"):
        kwok_binary(tmp_path, progress=RecordingProgress(), builder=FakeBuilder("kwok version v0.6.1"))
    assert not (tmp_path / f"kwok-v0.7.0-{toolchain}").exists()


def test_not_built_yet_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(BinariesError, match=r"kwok \(sigs\.k8s\.io/kwok@v0\.7\.0\) is not built yet .*"
                                            r"run `python -m numalab\.fleet\.build`"):
        command_binary(KWOK, tmp_path, progress=RecordingProgress(), build=False)
