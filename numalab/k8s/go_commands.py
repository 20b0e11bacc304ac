"""One command of a published Go module (etcd, kwok), built from the Go module proxy and cached like CoreDNS.

Why a wrapper module: `go install module/cmd@version` refuses a module whose go.mod has replace directives
(etcd's server module replaces its siblings with ../api and the like), and the Go build cache is shared
only when every build goes through `go build` with the environment's settings. The wrapper requires the
module at its pin, imports the command's package from a `tools`-tagged file so `go mod tidy` keeps every
module it needs (at the versions the module itself requires), and `go build`s that package:
CGO_ENABLED=0, -trimpath, -s -w, like the other builds here. The binary is checked by what `--version`
prints and cached beside the Kubernetes binaries as <binary>-<version>-<go version>/bin/<binary>.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalab.k8s.building import BUILD_LOG, DOWNLOAD_LINE, PACKAGE_LINE, require_go, run_logged
from numalab.k8s.cache import BIN_DIR, NotCached, cached_entry, default_cache_root
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import SourceError, download_module, go_binary, go_version
from numalab.progress import Progress

CHECK_TIMEOUT_SECONDS = 60
BUILD_COMMAND = "python -m numalab.fleet.build"  # what a missing binary's message tells the user to run

_GO_DIRECTIVE = re.compile(r"^go\s+(\d+(?:\.\d+)*)\s*$", re.M)


@dataclass(frozen=True)
class GoCommand:
    """Which package of which module@version makes `binary`, and what its --version output must contain."""

    binary: str
    module: str
    version: str
    package: str
    version_text: str  # e.g. "etcd Version: 3.6.16": a line `binary --version` prints (or its start, then a space)
    ldflags: str = "-s -w"

    @property
    def key(self) -> str:
        return f"{self.binary}-{self.version}"

    @property
    def wrapper(self) -> str:
        return f"numalab.local/{self.binary}build"


# Builds `command` into work/bin/<binary> and returns manifest fields; go_build_command is the real one.
Builder = Callable[[GoCommand, Path, Progress, Mapping[str, str]], dict[str, Any]]


def wrapper_go_mod(command: GoCommand, go: str) -> str:
    """go.mod of the wrapper: the module at its pin; `go mod tidy` adds the rest at the module's own versions."""
    return f"module {command.wrapper}\n\ngo {go}\n\nrequire {command.module} {command.version}\n"


def tools_go(command: GoCommand) -> str:
    """Imports the command's package (a main package) under the `tools` tag: tidy keeps it, builds skip it."""
    return f'//go:build tools\n\npackage tools\n\nimport _ "{command.package}"\n'


def go_build_command(
    command: GoCommand, work: Path, progress: Progress, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Build `command` into work/bin (work/module the wrapper, work/build.log the output, WORK.log on failure)."""
    env = dict(environ, CGO_ENABLED="0")
    what = f"{command.module}@{command.version}"
    try:
        with progress.step(f"module download {what}"):
            module = download_module(command.version, env, module=command.module)
        go_mod = (module.directory / "go.mod").read_text()
        toolchain, go = go_version(env), go_binary()
    except (SourceError, OSError) as exc:
        raise BinariesError(str(exc)) from None
    needed = _GO_DIRECTIVE.search(go_mod)
    if needed is None:
        raise BinariesError(f"{what}'s go.mod has no `go` line; cannot tell which Go it needs")
    require_go(toolchain, needed.group(1), what)
    wrapper = work / "module"
    wrapper.mkdir(parents=True, exist_ok=True)
    (wrapper / "go.mod").write_text(wrapper_go_mod(command, needed.group(1)))
    (wrapper / "tools.go").write_text(tools_go(command))
    (work / BIN_DIR).mkdir(exist_ok=True)
    log_path = work.with_name(work.name + ".log")  # outlives a failed build's work directory
    with log_path.open("w") as log:
        with progress.step(f"go mod tidy ({command.binary})"):
            tidy_env = dict(env, GOFLAGS=f"{env.get('GOFLAGS', '')} -mod=mod".strip())
            run_logged([go, "mod", "tidy"], wrapper, tidy_env, log, progress, DOWNLOAD_LINE, "modules downloaded")
        argv = [go, "build", "-v", "-trimpath", "-ldflags", command.ldflags,
                "-o", str(work / BIN_DIR / command.binary), command.package]
        with progress.step(f"go build {command.binary} ({what})"):
            run_logged(argv, wrapper, env, log, progress, PACKAGE_LINE, "packages compiled")
    log_path.replace(work / BUILD_LOG)
    return {"module_sum": module.sum, "published": module.time, "ldflags": command.ldflags,
            "package": command.package, "go_directive": needed.group(1)}


def version_problem(binary: Path, command: GoCommand) -> str | None:
    """Why `binary` is not `command` at its version (a line `--version` must print is missing), or None."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=CHECK_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {binary} --version: {exc}"
    said = done.stdout + done.stderr
    lines = [line.strip() for line in said.splitlines()]
    if done.returncode != 0 or not any(line == command.version_text or line.startswith(command.version_text + " ")
                                       for line in lines):
        first = said.strip().splitlines()[0] if said.strip() else "nothing"
        return f"`{binary.name} --version` exited {done.returncode} saying {first!r}, expected {command.version_text!r}"
    return None


def command_binary(
    command: GoCommand,
    cache_root: Path | None = None,
    *,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
    build: bool = True,
    builder: Builder = go_build_command,
) -> Path:
    """The checked binary of `command`, built and cached under cache_root (default: the Kubernetes binaries')."""
    env = dict(os.environ if environ is None else environ)
    progress = progress or Progress()
    root = default_cache_root(env) if cache_root is None else cache_root
    what = f"{command.module}@{command.version}"
    try:
        toolchain = go_version(env)
    except SourceError as exc:
        raise BinariesError(str(exc)) from None

    def fill(work: Path) -> dict[str, Any]:
        fields = builder(command, work, progress, env)
        with progress.step(f"check {command.binary} --version"):
            problem = version_problem(work / BIN_DIR / command.binary, command)
        if problem:
            raise BinariesError(f"the {command.binary} build ({what}) is refused: {problem}")
        return dict(fields, source=what, version=command.version, go_version=toolchain)

    key = f"{command.key}-{toolchain}"
    try:
        entry = cached_entry(root, key, fill, progress, build=build, binaries=(command.binary,))
    except NotCached:
        raise BinariesError(
            f"{command.binary} ({what}) is not built yet for {toolchain} under {root}; run `{BUILD_COMMAND}`"
        ) from None
    return entry / BIN_DIR / command.binary
