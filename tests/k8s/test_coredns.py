"""CoreDNS's wrapper module, its build with the Go commands faked, and the cache entry with its version check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from numalab.k8s import coredns
from numalab.k8s.coredns import (
    COREDNS_VERSION,
    PLUGINS,
    coredns_binary,
    coredns_problem,
    main_go,
    plugin_packages,
    wrapper_go_mod,
)
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import ModuleSource, go_version
from tests.k8s.fakebinaries import RecordingProgress

# Shaped like CoreDNS's plugin.cfg, deliberately in another order than PLUGINS.
PLUGIN_CFG = """\
# Directives are registered in the order they should be executed.
#
#     <plugin-name>:<package-name>
# log:github.com/coredns/coredns/plugin/log

root:root
reload:reload
ready:ready
health:health
prometheus:metrics
errors:errors
log:log
loadbalance:loadbalance
cache:cache
kubernetes:kubernetes
loop:loop
forward:forward
on:github.com/coredns/caddy/onevent
"""
ORDER = ["reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop"]


def fake_coredns(path: Path, version: str = "1.15.0", plugins: tuple[str, ...] = PLUGINS) -> Path:
    """A script answering -version and -plugins the way the real binary does."""
    listing = "\\n".join(sorted((*plugins, "metadata", "transfer")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"[ \"$1\" = -version ] && printf 'CoreDNS-{version}\\nlinux/amd64, go1.26.8, v{version}\\n'\n"
        f"[ \"$1\" = -plugins ] && printf '{listing}\\n\\n'\n"
        "exit 0\n"
    )
    path.chmod(0o755)
    return path


class FakeBuilder:
    def __init__(self, version: str = "1.15.0", plugins: tuple[str, ...] = PLUGINS) -> None:
        self.version, self.plugins, self.calls = version, plugins, 0

    def __call__(self, version, work, progress, environ):
        self.calls += 1
        fake_coredns(work / "bin" / "coredns", self.version, self.plugins)
        return {"ldflags": "-s -w"}


@pytest.fixture(scope="module")
def toolchain():
    return go_version()


def test_plugins_come_in_plugin_cfg_order_with_their_packages():
    found = plugin_packages(PLUGIN_CFG, (*PLUGINS, "prometheus", "on"))
    assert [name for name, _ in found] == ["reload", "ready", "health", "prometheus", *ORDER[3:], "on"]
    packages = dict(found)
    assert packages["prometheus"] == "github.com/coredns/coredns/plugin/metrics"
    assert packages["on"] == "github.com/coredns/caddy/onevent"
    assert packages["kubernetes"] == "github.com/coredns/coredns/plugin/kubernetes"


def test_a_plugin_missing_from_plugin_cfg_is_refused_by_name():
    with pytest.raises(BinariesError, match=r"plugin 'loadbalance' is not in github.com/coredns/coredns's plugin"):
        plugin_packages(PLUGIN_CFG.replace("loadbalance:loadbalance\n", ""))


def test_main_go_sets_the_directives_in_order_and_imports_each_plugin(tmp_path):
    text = main_go(plugin_packages(PLUGIN_CFG))
    directives = text.split("var directives = []string{\n")[1].split("}")[0]
    assert [line.strip().strip('",') for line in directives.splitlines()] == ORDER
    for name in PLUGINS:
        assert f'\t_ "github.com/coredns/coredns/plugin/{name}"\n' in text
    assert "dnsserver.Directives = directives" in text and "coremain.Run()" in text
    assert '_ "github.com/coredns/coredns/plugin/forward"' not in text
    (tmp_path / "main.go").write_text(text)
    gofmt = subprocess.run(["gofmt", "-l", str(tmp_path / "main.go")], capture_output=True, text=True)
    assert (gofmt.returncode, gofmt.stdout, gofmt.stderr) == (0, "", "")  # parses, and is formatted


def test_wrapper_go_mod_requires_coredns_at_the_pin(tmp_path):
    (tmp_path / "go.mod").write_text(wrapper_go_mod("1.26.0"))
    done = subprocess.run(["go", "mod", "edit", "-json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    parsed = json.loads(done.stdout)
    assert parsed["Module"]["Path"] == "numalab.local/corednsbuild" and parsed["Go"] == "1.26.0"
    assert parsed["Require"] == [{"Path": "github.com/coredns/coredns", "Version": COREDNS_VERSION}]


def test_go_build_writes_the_wrapper_and_builds_static_stamped_and_trimmed(tmp_path, monkeypatch):
    module = tmp_path / "coredns@v1.15.0"
    module.mkdir()
    (module / "go.mod").write_text("module github.com/coredns/coredns\n\ngo 1.26.0\n")
    (module / "plugin.cfg").write_text(PLUGIN_CFG)
    source = ModuleSource("v1.15.0", module, "2026-10-21T02:17:32Z", "h1:x")
    monkeypatch.setattr(coredns, "download_module", lambda version, env, module: source)
    ran: list[tuple[list[str], dict]] = []

    def run_logged(argv, cwd, env, log, progress, counted, unit):
        ran.append((argv, dict(env)))
        if argv[1] == "build":
            fake_coredns(Path(argv[argv.index("-o") + 1]))

    monkeypatch.setattr(coredns, "run_logged", run_logged)
    work = tmp_path / "entry.build"
    fields = coredns.go_build_coredns("v1.15.0", work, RecordingProgress(), {"GOFLAGS": "-buildvcs=false"})
    assert (work / "module" / "go.mod").read_text() == wrapper_go_mod("1.26.0")
    assert "dnsserver.Directives = directives" in (work / "module" / "main.go").read_text()
    (tidy, tidy_env), (build, build_env) = ran
    assert tidy[1:] == ["mod", "tidy"] and tidy_env["GOFLAGS"] == "-buildvcs=false -mod=mod"
    assert build_env["CGO_ENABLED"] == "0" and build_env["GOFLAGS"] == "-buildvcs=false"
    assert build[1:5] == ["build", "-v", "-trimpath", "-tags"] and build[-1] == "."
    assert "-s -w -X github.com/coredns/coredns/coremain.GitCommit=v1.15.0" in build
    assert fields["directives"] == ORDER and (work / "build.log").is_file()


def test_build_is_checked_and_cached_by_version_and_go(tmp_path, toolchain):
    builder = FakeBuilder()
    binary = coredns_binary(tmp_path, builder=builder, progress=RecordingProgress())
    entry = tmp_path / f"coredns-v1.15.0-{toolchain}"
    assert binary == entry / "bin" / "coredns"
    assert [line.split("  ")[1] for line in (entry / "SHA256SUMS").read_text().splitlines()] == ["bin/coredns"]
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["version"] == "v1.15.0" and manifest["go_version"] == toolchain
    assert manifest["plugins"] == list(PLUGINS)
    progress = RecordingProgress()
    assert coredns_binary(tmp_path, builder=builder, progress=progress, build=False) == binary
    assert builder.calls == 1 and progress.saw("check cached")


def test_build_printing_another_version_is_refused_and_not_cached(tmp_path):
    with pytest.raises(BinariesError, match=r"`coredns -version` says 'CoreDNS-1.14.2', expected 'CoreDNS-1.15.0'"):
        coredns_binary(tmp_path, builder=FakeBuilder(version="1.14.2"), progress=RecordingProgress())
    assert [path.suffix for path in tmp_path.iterdir()] == [".lock"]


def test_build_lacking_a_plugin_is_refused(tmp_path):
    lacking = tuple(name for name in PLUGINS if name not in ("kubernetes", "loop"))
    with pytest.raises(BinariesError, match=r"`coredns -plugins` lists no kubernetes, loop"):
        coredns_binary(tmp_path, builder=FakeBuilder(plugins=lacking), progress=RecordingProgress())


def test_not_built_yet_is_reported_when_building_is_off(tmp_path, toolchain):
    with pytest.raises(BinariesError, match=rf"CoreDNS v1\.15\.0 is not built yet for {toolchain} under {tmp_path}"):
        coredns_binary(tmp_path, builder=FakeBuilder(), build=False)


def test_a_binary_that_does_not_run_is_a_problem_not_a_crash(tmp_path):
    broken = tmp_path / "coredns"
    broken.write_text("#!/bin/sh\necho boom >&2\nexit 2\n")
    broken.chmod(0o755)
    with pytest.raises(BinariesError, match=r"coredns -version exited 2: boom"):
        coredns_problem(broken)
    assert coredns_problem(fake_coredns(tmp_path / "ok" / "coredns")) is None
