"""The k8s.io/kubernetes Go module of a release, fetched into the Go module cache by `go mod download`.

The module holds the sources numa-lab builds from (cmd/kubelet, ..., build/pause/linux/pause.c) and its
own go.mod, which lists the staging modules a wrapper module must replace. GOPROXY, GOFLAGS and the
other Go settings come from the environment, so a user's own proxy works.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from numalab.k8s.versions import KUBERNETES_MODULE

_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")


class SourceError(RuntimeError):
    """The module could not be had: no Go, a version that does not exist, or an unreachable proxy."""


def parse_version(version: str) -> tuple[int, int, int]:
    """`v1.36.3` -> (1, 36, 3); anything else is refused."""
    match = _VERSION.match(version)
    if not match:
        raise SourceError(f"{version!r} is not a Kubernetes release version like v1.36.3")
    return 1, int(match.group(1)), int(match.group(2))


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise SourceError("no `go` on PATH: building Kubernetes from the Go module proxy needs Go 1.26 or newer")
    return go


@dataclass(frozen=True)
class ModuleSource:
    """A downloaded module (k8s.io/kubernetes unless named): where it is extracted, when it was published."""

    version: str
    directory: Path
    time: str  # RFC 3339 from the module's .info, e.g. 2026-07-22T18:07:38Z: a build date that does not change
    sum: str  # the go.sum hash of the module zip (h1:...)


def go_version(environ: Mapping[str, str] | None = None) -> str:
    """The Go toolchain `go` runs, e.g. go1.26.8 (outside any module, so no go.mod switches it)."""
    env = dict(os.environ if environ is None else environ)
    done = subprocess.run(
        [go_binary(), "env", "GOVERSION"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd="/",
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise SourceError(f"`go env GOVERSION` failed: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout.strip()


def download_module(
    version: str, environ: Mapping[str, str] | None = None, *, module: str = KUBERNETES_MODULE
) -> ModuleSource:
    """module@version (k8s.io/kubernetes by default) in the Go module cache, downloading it if needed."""
    if module == KUBERNETES_MODULE:
        parse_version(version)
    env = dict(os.environ if environ is None else environ)
    done = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    )
    try:
        info = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        info = {}
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        reason = info.get("Error") or done.stderr.strip() or f"go exited {done.returncode}"
        raise SourceError(f"{module}@{version} cannot be downloaded: {reason}")
    try:
        published = json.loads(Path(info["Info"]).read_text())["Time"]
    except (KeyError, OSError, ValueError) as exc:
        raise SourceError(f"{module}@{version}: no publication time in {info.get('Info')}: {exc}") from None
    return ModuleSource(version=version, directory=Path(info["Dir"]), time=published, sum=info.get("Sum", ""))


def kubernetes_module_dir(version: str, environ: Mapping[str, str] | None = None) -> Path:
    """The extracted module k8s.io/kubernetes@version in the Go module cache, downloading it if needed."""
    return download_module(version, environ).directory
