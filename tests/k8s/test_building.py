"""The wrapper module, the version stamp and the logged runner of the Go build (no real build here)."""

from __future__ import annotations

import json
import subprocess

import pytest

from numalab.k8s import building
from numalab.k8s.building import (
    build_date,
    staging_modules,
    tools_go,
    version_ldflags,
    wrapper_go_mod,
)
from numalab.k8s.errors import BinariesError
from tests.k8s.fakebinaries import RecordingProgress

# Shaped like k8s.io/kubernetes's go.mod: staging modules required at v0.0.0 and replaced with local dirs.
KUBERNETES_GO_MOD = """\
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/spf13/pflag v1.0.9
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace github.com/some/fork => github.com/other/fork v1.2.3

replace k8s.io/kube-proxy => ./staging/src/k8s.io/kube-proxy

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/component-base v0.0.0 => ./staging/src/k8s.io/component-base
)
"""


def test_staging_modules_are_the_local_replacements_only():
    assert staging_modules(KUBERNETES_GO_MOD) == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/component-base",
        "k8s.io/kube-proxy",
    ]


def test_wrapper_go_mod_replaces_staging_with_published_modules(tmp_path):
    text = wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3")
    (tmp_path / "go.mod").write_text(text)
    # `go mod edit -json` parses it as go itself will (offline).
    done = subprocess.run(["go", "mod", "edit", "-json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    parsed = json.loads(done.stdout)
    assert parsed["Module"]["Path"] == "numalab.local/k8sbuild"
    assert parsed["Go"] == "1.26.0"
    assert parsed["Require"] == [{"Path": "k8s.io/kubernetes", "Version": "v1.36.3"}]
    assert {r["Old"]["Path"]: r["New"] for r in parsed["Replace"]} == {
        name: {"Path": name, "Version": "v0.36.3"}
        for name in ("k8s.io/api", "k8s.io/client-go", "k8s.io/component-base", "k8s.io/kube-proxy")
    }


def test_wrapper_go_mod_refuses_a_go_mod_without_staging():
    with pytest.raises(BinariesError, match="replaces no module with ./staging"):
        wrapper_go_mod("module k8s.io/kubernetes\n\ngo 1.26.0\n", "v1.36.3")
    with pytest.raises(BinariesError, match="has no `go` line"):
        wrapper_go_mod("module k8s.io/kubernetes\nreplace k8s.io/api => ./staging/src/k8s.io/api\n", "v1.36.3")


def test_tools_go_imports_the_four_commands():
    text = tools_go()
    assert text.startswith("//go:build tools\n")
    for name in ("kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert f'\t_ "k8s.io/kubernetes/cmd/{name}"\n' in text


def test_ldflags_stamp_both_version_packages_like_hack_lib_version():
    flags = version_ldflags("v1.36.3", build_date("2026-07-22T18:07:38Z"))
    assert flags.startswith("-s -w ")
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for value in ("gitVersion=v1.36.3", "gitMajor=1", "gitMinor=36", "gitTreeState=clean"):
            assert f"-X {package}.{value}" in flags
        assert f"-X {package}.buildDate=2026-07-22T18:07:38Z" in flags


def test_build_date_is_utc_in_version_sh_format():
    assert build_date("2026-07-22T20:07:38+02:00") == "2026-07-22T18:07:38Z"


def test_runner_logs_output_counts_packages_and_reports_the_last_error(tmp_path, monkeypatch):
    monkeypatch.setattr(building, "PACKAGES_PER_NOTE", 2)
    output = ["k8s.io/api/core/v1", "k8s.io/apimachinery/pkg/util", "# k8s.io/x", "x.go:3:1: undefined: y"]
    script = f"printf '%s\\n' {' '.join(repr(line) for line in output)}; exit 3"
    progress = RecordingProgress()
    with (tmp_path / "build.log").open("w") as log, pytest.raises(BinariesError) as failed:
        building.run_logged(["sh", "-c", script], tmp_path, {}, log, progress, building.PACKAGE_LINE, "packages")
    assert str(failed.value) == f"sh -c failed (exit 3): x.go:3:1: undefined: y; full output in {tmp_path}/build.log"
    assert progress.lines == ["  sh -c: 2 packages so far, last k8s.io/apimachinery/pkg/util"]
    assert "k8s.io/api/core/v1\n" in (tmp_path / "build.log").read_text()


def test_runner_notes_a_heartbeat_when_the_command_is_quiet(tmp_path, monkeypatch):
    monkeypatch.setattr(building, "HEARTBEAT_SECONDS", 0.2)
    progress = RecordingProgress()
    with (tmp_path / "build.log").open("w") as log:
        building.run_logged(["sh", "-c", "sleep 0.7"], tmp_path, {}, log, progress, building.PACKAGE_LINE, "pkgs")
    assert len(progress.lines) >= 2 and set(progress.lines) == {"  sh -c: 0 pkgs so far"}


def test_older_go_than_the_module_needs_is_refused():
    with pytest.raises(BinariesError, match=r"needs Go 1\.27\.0 or newer; `go` on PATH is go1\.26\.8"):
        building.require_go("go1.26.8", "1.27.0", "k8s.io/kubernetes@v1.37.0")
    building.require_go("go1.26.8", "1.26.0", "k8s.io/kubernetes@v1.36.3")
    building.require_go("devel go1.27-abcdef", "1.27.0", "k8s.io/kubernetes@v1.37.0")
