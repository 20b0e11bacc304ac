"""The topology-aware scheduler's wrapper module, its build with Go faked, and its cache entry and checks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from numalab.files import file_digest
from numalab.k8s import scheduler, scheduler_fix
from numalab.k8s.building import build_date, version_ldflags
from numalab.k8s.errors import BinariesError
from numalab.k8s.scheduler import (
    BINARY,
    FIX_SYMBOL,
    PLUGIN,
    SCHEDULER_PLUGINS_VERSION,
    main_go,
    scheduler_binary,
    scheduler_problem,
    wrapper_go_mod,
)
from numalab.k8s.scheduler_fix import FIX_TESTS, fix_digest, fix_sources
from numalab.k8s.source import ModuleSource, SourceError
from tests.k8s.fakebinaries import RecordingProgress
from tests.k8s.test_building import KUBERNETES_GO_MOD

TOOLCHAIN = "go1.26.8"
PLUGINS_GO_MOD = """\
module sigs.k8s.io/scheduler-plugins

go 1.24.0

require (
\tk8s.io/kubernetes v1.35.4
\tsigs.k8s.io/controller-runtime v0.22.3
)

replace k8s.io/kubernetes => k8s.io/kubernetes v1.35.4
"""
STAGING = ("k8s.io/api", "k8s.io/client-go", "k8s.io/component-base", "k8s.io/kube-proxy")


def fake_scheduler(path: Path, version: str = "v1.36.3", plugin: bool = True, fix: bool = True) -> Path:
    """A script printing `Kubernetes <version>` for --version, naming the plugin and the fix as the binary does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    linked = (f"# {PLUGIN}\n" if plugin else "") + (f"# {FIX_SYMBOL}\n" if fix else "")
    path.write_text(f'#!/bin/sh\n{linked}[ "$1" = --version ] && echo "Kubernetes {version}"\nexit 0\n')
    path.chmod(0o755)
    return path


class FakeBuilder:
    def __init__(self, version: str = "v1.36.3", plugin: bool = True, fix: bool = True) -> None:
        self.version, self.plugin, self.fix, self.calls = version, plugin, fix, 0

    def __call__(self, kubernetes_version, work, progress, environ):
        self.calls += 1
        fake_scheduler(work / "bin" / BINARY, self.version, self.plugin, self.fix)
        return {"ldflags": "-s -w"}


@pytest.fixture(autouse=True)
def no_go(monkeypatch):
    """The cache key's toolchain without running Go."""
    monkeypatch.setattr(scheduler, "go_version", lambda env=None: TOOLCHAIN)


def go_mod_blocks(text: str, keyword: str) -> list[str]:
    """The lines of every `keyword (...)` block and single `keyword x` line of a go.mod."""
    lines: list[str] = []
    for block in re.findall(rf"^{keyword} \(\n(.*?)^\)", text, re.M | re.S):
        lines += [line.strip() for line in block.splitlines() if line.strip()]
    lines += re.findall(rf"^{keyword} ([^(\n].*)$", text, re.M)
    return lines


def test_wrapper_go_mod_is_the_kubernetes_builds_plus_the_plugins_pins():
    text = wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3", PLUGINS_GO_MOD)
    assert text.startswith("module numalab.local/schedulerbuild\n\ngo 1.26.0\n")
    requires = go_mod_blocks(text, "require")
    assert sorted(requires) == sorted([
        "k8s.io/kubernetes v1.36.3",
        f"sigs.k8s.io/scheduler-plugins {SCHEDULER_PLUGINS_VERSION}",
        "sigs.k8s.io/controller-runtime v0.24.1",
    ])
    replaces = go_mod_blocks(text, "replace")
    assert sorted(replaces) == sorted(
        [f"{name} => {name} v0.36.3" for name in STAGING] + ["k8s.io/kubernetes => k8s.io/kubernetes v1.36.3"]
    )


def test_wrapper_go_mod_takes_the_newer_go_line_and_needs_one():
    newer = PLUGINS_GO_MOD.replace("go 1.24.0", "go 1.26.2")
    assert "\ngo 1.26.2\n" in wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3", newer)
    with pytest.raises(BinariesError, match=r"sigs.k8s.io/scheduler-plugins@v0.35.4-devel's go.mod has no `go` line"):
        wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3", "module sigs.k8s.io/scheduler-plugins\n")


@pytest.mark.skipif(shutil.which("go") is None, reason="no Go to parse the go.mod")
def test_go_parses_the_wrapper_go_mod(tmp_path):
    (tmp_path / "go.mod").write_text(wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3", PLUGINS_GO_MOD))
    done = subprocess.run(["go", "mod", "edit", "-json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    parsed = json.loads(done.stdout)
    replaced = {r["Old"]["Path"]: r["New"]["Version"] for r in parsed["Replace"]}
    assert replaced == {**dict.fromkeys(STAGING, "v0.36.3"), "k8s.io/kubernetes": "v1.36.3"}
    assert {r["Path"]: r["Version"] for r in parsed["Require"]}["sigs.k8s.io/controller-runtime"] == "v0.24.1"


def test_main_go_registers_only_the_topology_plugin_through_the_fix(tmp_path):
    text = main_go()
    assert "app.NewSchedulerCommand(app.WithPlugin(noderesourcetopology.Name, nrtadopt.New))" in text
    assert '\t"k8s.io/kubernetes/cmd/kube-scheduler/app"\n' in text
    assert '\t"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"\n' in text
    assert '\t"numalab.local/schedulerbuild/nrtadopt"\n' in text
    assert '\t_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"\n' in text
    assert text.count("app.WithPlugin(") == 1 and "os.Exit(cli.Run(command))" in text
    if shutil.which("gofmt"):
        (tmp_path / "main.go").write_text(text)
        gofmt = subprocess.run(["gofmt", "-l", str(tmp_path / "main.go")], capture_output=True, text=True)
        assert (gofmt.returncode, gofmt.stdout, gofmt.stderr) == (0, "", "")  # parses, and is formatted


def fake_modules(tmp_path, monkeypatch, plugins_go_mod: str = PLUGINS_GO_MOD) -> list[tuple[str, str]]:
    downloaded: list[tuple[str, str]] = []
    sources = {"k8s.io/kubernetes": KUBERNETES_GO_MOD, "sigs.k8s.io/scheduler-plugins": plugins_go_mod}

    def download_module(version, env, module="k8s.io/kubernetes"):
        downloaded.append((module, version))
        directory = tmp_path / f"{module.replace('/', '_')}@{version}"
        directory.mkdir(exist_ok=True)
        (directory / "go.mod").write_text(sources[module])
        return ModuleSource(version, directory, "2026-10-21T02:17:32Z", f"h1:{module}")

    monkeypatch.setattr(scheduler, "download_module", download_module)
    monkeypatch.setattr(scheduler, "go_binary", lambda: "/usr/bin/go")
    return downloaded


def test_go_build_writes_the_wrapper_and_builds_static_stamped_and_trimmed(tmp_path, monkeypatch):
    downloaded = fake_modules(tmp_path, monkeypatch)
    ran: list[tuple[list[str], dict]] = []

    def run_logged(argv, cwd, env, log, progress, counted, unit):
        ran.append((argv, dict(env)))
        if argv[1] == "test":
            log.write("".join(f"--- PASS: {name} (0.01s)\n" for name in FIX_TESTS) + "PASS\n")
        if argv[1] == "build":
            fake_scheduler(Path(argv[argv.index("-o") + 1]))

    monkeypatch.setattr(scheduler, "run_logged", run_logged)
    monkeypatch.setattr(scheduler_fix, "run_logged", run_logged)
    work = tmp_path / "entry.build"
    fields = scheduler.go_build_scheduler("v1.36.3", work, RecordingProgress(), {"GOFLAGS": "-buildvcs=false"})
    assert downloaded == [
        ("k8s.io/kubernetes", "v1.36.3"), ("sigs.k8s.io/scheduler-plugins", SCHEDULER_PLUGINS_VERSION)
    ]
    assert (work / "module" / "go.mod").read_text() == wrapper_go_mod(KUBERNETES_GO_MOD, "v1.36.3", PLUGINS_GO_MOD)
    assert (work / "module" / "main.go").read_text() == main_go()
    assert {name: (work / "module" / name).read_bytes() for name in fix_sources()} == fix_sources()
    (tidy, tidy_env), (test, test_env), (build, build_env) = ran
    assert tidy[1:] == ["mod", "tidy"] and tidy_env["GOFLAGS"] == "-buildvcs=false -mod=mod"
    # The fix's test before the build, with the build's flags and environment: the build reuses its packages.
    assert test[1:] == ["test", "-trimpath", "-v", "./nrtadopt/"] and test_env == build_env
    assert build_env["CGO_ENABLED"] == "0" and build_env["GOFLAGS"] == "-buildvcs=false"
    flags = version_ldflags("v1.36.3", build_date("2026-10-21T02:17:32Z"))
    assert build[1:] == ["build", "-v", "-trimpath", "-ldflags", flags, "-o", str(work / "bin" / BINARY), "."]
    assert fields["ldflags"] == flags and (work / "build.log").is_file()
    assert fields["fix_digest"] == fix_digest() and fields["fix_tests_passed"] == sorted(FIX_TESTS)


def test_a_failing_fix_test_builds_nothing(tmp_path, monkeypatch):
    fake_modules(tmp_path, monkeypatch)
    ran: list[str] = []

    def run_logged(argv, cwd, env, log, progress, counted, unit):
        ran.append(argv[1])
        if argv[1] == "test":
            log.write(f"    --- FAIL: {FIX_TESTS[0]}/created_after_start (3.02s)\nFAIL\n")
            raise BinariesError("go test failed (exit 1): FAIL; full output in x.log")

    monkeypatch.setattr(scheduler, "run_logged", run_logged)
    monkeypatch.setattr(scheduler_fix, "run_logged", run_logged)
    with pytest.raises(BinariesError, match=rf"the fix's go test failed {FIX_TESTS[0]}/created_after_start; "
                                            r"full output in .*entry\.build\.log"):
        scheduler.go_build_scheduler("v1.36.3", tmp_path / "entry.build", RecordingProgress(), {})
    assert ran == ["mod", "test"]


def test_go_too_old_for_the_modules_is_refused_before_building(tmp_path, monkeypatch):
    fake_modules(tmp_path, monkeypatch, PLUGINS_GO_MOD.replace("go 1.24.0", "go 1.27.0"))
    monkeypatch.setattr(scheduler, "run_logged", lambda *args: pytest.fail("built with a Go too old"))
    with pytest.raises(BinariesError, match=r"scheduler-plugins@v0.35.4-devel with k8s.io/kubernetes@v1.36.3 needs "
                                            r"Go 1.27.0 or newer; `go` on PATH is go1.26.8"):
        scheduler.go_build_scheduler("v1.36.3", tmp_path / "work", RecordingProgress(), {})


def test_a_module_that_cannot_be_downloaded_is_named(tmp_path, monkeypatch):
    def download_module(version, env, module="k8s.io/kubernetes"):
        raise SourceError(f"{module}@{version} cannot be downloaded: 410 Gone")

    monkeypatch.setattr(scheduler, "download_module", download_module)
    with pytest.raises(BinariesError, match=r"building numa-scheduler \(.*\) failed: k8s.io/kubernetes@v1.36.3 "
                                            r"cannot be downloaded: 410 Gone"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", progress=RecordingProgress(),
                         builder=scheduler.go_build_scheduler)


def test_build_is_checked_and_cached_by_both_versions_and_go(tmp_path):
    builder = FakeBuilder()
    binary = scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=builder, progress=RecordingProgress())
    entry = tmp_path / f"numa-scheduler-v1.36.3-{SCHEDULER_PLUGINS_VERSION}-{TOOLCHAIN}-fix{fix_digest()}"
    assert binary == entry / "bin" / BINARY
    assert [line.split("  ")[1] for line in (entry / "SHA256SUMS").read_text().splitlines()] == ["bin/numa-scheduler"]
    manifest = json.loads((entry / "manifest.json").read_text())
    assert (manifest["version"], manifest["plugins_version"], manifest["go_version"]) == (
        "v1.36.3", SCHEDULER_PLUGINS_VERSION, TOOLCHAIN)
    assert manifest["plugin"] == PLUGIN
    progress = RecordingProgress()
    again = scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=builder, progress=progress, build=False)
    assert again == binary and builder.calls == 1 and progress.saw("check cached")
    scheduler_binary(tmp_path, kubernetes_version="v1.36.2", builder=FakeBuilder("v1.36.2"))
    assert (tmp_path / f"numa-scheduler-v1.36.2-{SCHEDULER_PLUGINS_VERSION}-{TOOLCHAIN}-fix{fix_digest()}").is_dir()


def test_build_printing_another_version_is_refused_and_not_cached(tmp_path):
    with pytest.raises(BinariesError, match=r"is refused: `numa-scheduler --version` says Kubernetes v0\.0\.0-master, "
                                            r"expected Kubernetes v1\.36\.3"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=FakeBuilder("v0.0.0-master"))
    assert [path.suffix for path in tmp_path.iterdir()] == [".lock"]


def test_a_stock_kube_scheduler_is_refused(tmp_path):
    with pytest.raises(BinariesError, match=r"has no NodeResourceTopologyMatch plugin compiled in"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=FakeBuilder(plugin=False))


def test_the_plugin_without_the_fix_is_refused(tmp_path):
    with pytest.raises(BinariesError, match=r"has no numalab.local/schedulerbuild/nrtadopt.New linked in \(upstream's "
                                            r"plugin without numa-lab's fix for issue 967\)"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=FakeBuilder(fix=False))


def test_not_built_yet_is_reported_when_building_is_off(tmp_path):
    builder = FakeBuilder()
    with pytest.raises(BinariesError, match=rf"numa-scheduler \(.*@v1\.36\.3\) is not built yet for {TOOLCHAIN} "
                                            rf"under {tmp_path}"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=builder, build=False)
    assert builder.calls == 0


def test_a_cached_binary_for_another_version_is_refused_on_use(tmp_path):
    scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=FakeBuilder())
    entry = tmp_path / f"numa-scheduler-v1.36.3-{SCHEDULER_PLUGINS_VERSION}-{TOOLCHAIN}-fix{fix_digest()}"
    fake_scheduler(entry / "bin" / BINARY, "v1.35.0")
    (entry / "SHA256SUMS").write_text(f"{file_digest(entry / 'bin' / BINARY)}  bin/{BINARY}\n")
    with pytest.raises(BinariesError, match=rf"cached {entry}/bin/numa-scheduler: .*says Kubernetes v1\.35\.0.*; "
                                            rf"remove {entry} to rebuild it"):
        scheduler_binary(tmp_path, kubernetes_version="v1.36.3", builder=FakeBuilder(), build=False)


def test_a_binary_that_does_not_run_is_a_problem_not_a_crash(tmp_path):
    broken = tmp_path / BINARY
    broken.write_text("#!/bin/sh\necho boom >&2\nexit 2\n")
    broken.chmod(0o755)
    assert "exited 2 printing 'boom'" in scheduler_problem(broken, "v1.36.3")
    assert scheduler_problem(fake_scheduler(tmp_path / "ok" / BINARY), "v1.36.3") is None


def test_an_unsupported_kubernetes_version_is_refused():
    with pytest.raises(BinariesError, match=r"'1\.36' is not a Kubernetes release version"):
        scheduler_binary(Path("/nonexistent"), kubernetes_version="1.36", builder=FakeBuilder())
