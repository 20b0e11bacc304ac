"""Building the Kubernetes binaries (versions.BINARIES: the kubelet, control plane, kube-proxy) from the Go proxy.

k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces
them with ./staging/src/k8s.io/NAME, directories that are not in the module zip. A wrapper module requires
k8s.io/kubernetes and replaces each of them with the published k8s.io/NAME v0.Y.Z instead; `go mod tidy`
resolves the rest and `go build` links the commands with the version stamped the way
hack/lib/version.sh does. CGO_ENABLED=0 and -trimpath give static binaries whose compiled packages are
shared with any other build of the same sources in the Go build cache.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from numalab.k8s.errors import BinariesError
from numalab.k8s.source import SourceError, download_module, go_binary, go_version, parse_version
from numalab.k8s.versions import BINARIES, KUBERNETES_MODULE
from numalab.progress import Progress

WRAPPER_MODULE = "numalab.local/k8sbuild"
# The packages whose variables `kubelet --version` and the API's /version report (hack/lib/version.sh).
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
HEARTBEAT_SECONDS = 30.0
PACKAGES_PER_NOTE = 250
BUILD_LOG = "build.log"

_STAGING_REPLACE = re.compile(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)(?:\s+v\S+)?\s*=>\s*\./staging/", re.M)
_GO_DIRECTIVE = re.compile(r"^go\s+(\d+(?:\.\d+)*)\s*$", re.M)
_GO_RELEASE = re.compile(r"^go(\d+(?:\.\d+)*)")
PACKAGE_LINE = re.compile(r"^[\w.~-]+(?:/[\w.~+-]+)*$")
DOWNLOAD_LINE = re.compile(r"^go: downloading ")


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules k8s.io/kubernetes's go.mod replaces with ./staging/src/... directories, sorted."""
    return sorted(set(_STAGING_REPLACE.findall(kubernetes_go_mod)))


def go_directive(go_mod: str) -> str:
    """The `go 1.26.0` line of a go.mod: the oldest Go that may build it."""
    match = _GO_DIRECTIVE.search(go_mod)
    if not match:
        raise BinariesError("the k8s.io/kubernetes go.mod has no `go` line; cannot tell which Go it needs")
    return match.group(1)


def wrapper_go_mod(
    kubernetes_go_mod: str, version: str, *, module: str = WRAPPER_MODULE, go: str | None = None
) -> str:
    """go.mod of a module that builds k8s.io/kubernetes@version with its staging modules from the proxy.

    Other builds against the same Kubernetes (numalab/k8s/scheduler.py) name their own `module` and may need
    a newer `go` line than Kubernetes' own.
    """
    _, minor, patch = parse_version(version)
    staging = staging_modules(kubernetes_go_mod)
    if not staging:
        raise BinariesError(f"{KUBERNETES_MODULE}@{version}'s go.mod replaces no module with ./staging/...")
    replaces = "".join(f"\t{name} => {name} v0.{minor}.{patch}\n" for name in staging)
    return (
        f"module {module}\n\n"
        f"go {go or go_directive(kubernetes_go_mod)}\n\n"
        f"require {KUBERNETES_MODULE} {version}\n\n"
        f"replace (\n{replaces})\n"
    )


def tools_go() -> str:
    """A file that imports the commands so `go mod tidy` keeps every module they need."""
    imports = "".join(f'\t_ "{KUBERNETES_MODULE}/cmd/{name}"\n' for name in sorted(BINARIES))
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n"


def version_ldflags(version: str, build_date: str) -> str:
    """-ldflags stamping `version` as upstream release builds do (tree clean), stripped (-s -w)."""
    _, minor, _ = parse_version(version)
    values = {"gitVersion": version, "gitMajor": "1", "gitMinor": str(minor), "gitTreeState": "clean"}
    values["buildDate"] = build_date
    flags = ["-s", "-w"]
    for package in VERSION_PACKAGES:
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def build_date(published: str) -> str:
    """The module's publication time as hack/lib/version.sh formats buildDate, so rebuilds stamp the same."""
    moment = datetime.fromisoformat(published.replace("Z", "+00:00")).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def go_build(
    version: str, work: Path, progress: Progress, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Build the binaries of `version` into work/bin; returns manifest fields describing the build.

    work/module holds the wrapper module, work/build.log every command's output (WORK.log while it runs,
    and after a failure). The Go settings
    (GOPROXY, GOFLAGS, GOMODCACHE, GOCACHE, ...) are the environment's; -mod=mod is added for tidy only.
    """
    env = dict(os.environ if environ is None else environ)
    try:
        with progress.step(f"module download {KUBERNETES_MODULE}@{version}"):
            module = download_module(version, env)
        go_mod = (module.directory / "go.mod").read_text()
        toolchain = go_version(env)
        go = go_binary()
    except (SourceError, OSError) as exc:
        raise BinariesError(str(exc)) from None
    require_go(toolchain, go_directive(go_mod), f"{KUBERNETES_MODULE}@{version}",
               "install a newer Go or pick an older Kubernetes version")
    wrapper = work / "module"
    wrapper.mkdir(parents=True, exist_ok=True)
    (wrapper / "go.mod").write_text(wrapper_go_mod(go_mod, version))
    (wrapper / "tools.go").write_text(tools_go())
    (work / "bin").mkdir(exist_ok=True)
    env["CGO_ENABLED"] = "0"
    ldflags = version_ldflags(version, build_date(module.time))
    # Beside the work directory, which a failed build leaves to be removed: the log outlives the failure.
    log_path = work.with_name(work.name + ".log")
    with log_path.open("w") as log:
        with progress.step("go mod tidy"):
            tidy_env = dict(env, GOFLAGS=f"{env.get('GOFLAGS', '')} -mod=mod".strip())
            run_logged([go, "mod", "tidy"], wrapper, tidy_env, log, progress, DOWNLOAD_LINE, "modules downloaded")
        argv = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(work / "bin") + "/"]
        argv += [f"{KUBERNETES_MODULE}/cmd/{name}" for name in BINARIES]
        # Measured on 2 cores: ≈ 8 min with a cold Go build cache, ≈ 1.5 min (linking only) with a warm one.
        with progress.step(f"go build {', '.join(BINARIES)} (minutes; cached packages are not listed)"):
            run_logged(argv, wrapper, env, log, progress, PACKAGE_LINE, "packages compiled")
    log_path.replace(work / BUILD_LOG)
    stamp = build_date(module.time)
    return {"go_version": toolchain, "module_sum": module.sum, "build_date": stamp, "ldflags": ldflags}


def require_go(toolchain: str, needed: str, what: str, hint: str = "install a newer Go") -> None:
    """Refuse a Go older than `needed` (the go.mod's `go` line) for building `what` (module@version)."""
    match = _GO_RELEASE.match(toolchain)
    if match is None:
        return  # a development toolchain: let go itself judge
    have = tuple(int(part) for part in match.group(1).split("."))
    want = tuple(int(part) for part in needed.split("."))
    if have < want:
        raise BinariesError(f"{what} needs Go {needed} or newer; `go` on PATH is {toolchain} ({hint})")


def run_logged(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    log: IO[str],
    progress: Progress,
    counted: re.Pattern[str],
    unit: str,
) -> None:
    """Run argv with its output in `log`, noting every PACKAGES_PER_NOTE counted lines or HEARTBEAT_SECONDS."""
    log.write(f"$ cd {shlex.quote(str(cwd))} && {shlex.join(argv)}\n")
    log.flush()
    command = f"{Path(argv[0]).name} {argv[1]}"
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise BinariesError(f"cannot run {command}: {exc}") from None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    count, last, tail = 0, "", deque[str](maxlen=40)
    next_note = time.monotonic() + HEARTBEAT_SECONDS
    while True:
        try:
            line = lines.get(timeout=max(0.1, next_note - time.monotonic()))
        except queue.Empty:
            line = ""
        if line is None:
            break
        if line:
            log.write(line)
            tail.append(line.rstrip())
            if counted.match(line.rstrip()):
                count, last = count + 1, line.strip()
                if count % PACKAGES_PER_NOTE == 0:
                    next_note = 0.0
        if time.monotonic() >= next_note:
            progress.note(f"  {command}: {count} {unit} so far" + (f", last {last}" if last else ""))
            next_note = time.monotonic() + HEARTBEAT_SECONDS
    code = process.wait()
    log.flush()
    if code != 0:
        errors = [text for text in tail if text and not counted.match(text)]
        reason = errors[-1] if errors else "no output"
        raise BinariesError(f"{command} failed (exit {code}): {reason}; full output in {log.name}")


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)
