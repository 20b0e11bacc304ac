"""Which Kubernetes binaries a deploy installs: resolved from a spec and checked before any host is touched.

A spec is one of
  go:vX.Y.Z     built from the Go module proxy (numalab/k8s/building.py), cached per Kubernetes and Go version;
  a directory   holding the binaries of versions.BINARIES (kubelet, kube-apiserver, ..., kube-proxy), used in place;
  a tarball     kubernetes-server-linux-amd64.tar.gz (checked against NAME.sha512 beside it when present),
                extracted into the cache keyed by its sha512.
Every way ends in the same checks: the binaries are all there, run, and agree on one supported version.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalab.files import file_digest
from numalab.k8s.building import go_build
from numalab.k8s.cache import BIN_DIR, NotCached, cached_entry, read_sums
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import SourceError, go_version, parse_version
from numalab.k8s.tarball import check_sha512, extract_server_binaries
from numalab.k8s.versions import BINARIES, OLDEST_MINOR
from numalab.progress import Progress

GO_PREFIX = "go:"
VERSION_TIMEOUT_SECONDS = 60
SPEC_HELP = (
    f"go:vX.Y.Z, a directory holding {', '.join(BINARIES)}, or a kubernetes-server-linux-amd64.tar.gz"
)

# Builds `version` into work/bin and returns manifest fields; building.go_build is the real one.
Builder = Callable[[str, Path, Progress], dict[str, Any]]

_VERSION_OUTPUT = re.compile(r"^Kubernetes (\S+)\s*$", re.M)


@dataclass(frozen=True)
class Binaries:
    """The checked binaries: `directory`/NAME for NAME in versions.BINARIES, all printing `version`."""

    directory: Path
    version: str
    sha256: dict[str, str]
    source: str  # how they were had, for messages: "go:v1.36.3 built with go1.26.8", "tarball /path", ...

    def path(self, name: str) -> Path:
        return self.directory / name


def supported_version(version: str, where: str) -> str:
    """`version` when it is a release the lab runs (vX.Y.Z, v1.21 or newer); refused naming `where` otherwise."""
    try:
        _, minor, _ = parse_version(version)
    except SourceError:
        raise BinariesError(f"{where}: {version!r} is not a Kubernetes release version like v1.36.3") from None
    if minor < OLDEST_MINOR:
        raise BinariesError(
            f"{where}: {version} is older than v1.{OLDEST_MINOR}, the oldest release numa-lab supports "
            "(its kubelet lacks the memory manager flags)"
        )
    return version


def resolve_binaries(
    spec: str,
    cache_root: Path,
    expected_version: str | None = None,
    *,
    builder: Builder | None = None,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
    build: bool = True,
) -> Binaries:
    """The binaries `spec` names, checked; raises BinariesError (one line) for anything wrong.

    `go:` specs are built on a cache miss unless build=False; `builder` replaces the real Go build (tests).
    """
    progress = progress or Progress()
    if expected_version is not None:
        supported_version(expected_version, "expected version")
    if spec.startswith(GO_PREFIX):
        env = dict(os.environ if environ is None else environ)
        builder = builder or functools.partial(go_build, environ=env)
        return _from_go(spec, cache_root, expected_version, builder, progress, env, build)
    path = Path(spec).expanduser()
    try:
        is_dir = path.is_dir()
        path.stat()
    except FileNotFoundError:
        raise BinariesError(f"{spec}: no such directory or tarball (expected {SPEC_HELP})") from None
    except OSError as exc:
        raise BinariesError(f"{spec}: cannot read it: {exc.strerror}") from None
    if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
        raise BinariesError(f"{spec}: cannot read it (permission denied)")
    if is_dir:
        return inspect_directory(path.resolve(), expected_version, f"directory {path.resolve()}", progress)
    if not path.is_file():
        raise BinariesError(f"{spec}: neither a directory nor a regular file (expected {SPEC_HELP})")
    return _from_tarball(path.resolve(), cache_root, expected_version, progress)


def inspect_directory(
    directory: Path,
    expected_version: str | None,
    source: str,
    progress: Progress,
    sums: Mapping[str, str] | None = None,
    checked_version: str | None = None,
) -> Binaries:
    """Check the binaries in `directory` and describe them.

    Known `sums` save hashing them; `checked_version` is the version agreed_version just found for them.
    """
    version = checked_version or agreed_version(directory, expected_version, progress)
    if sums is None:
        with progress.step(f"sha256 of the binaries in {directory}"):
            sums = {name: file_digest(directory / name) for name in BINARIES}
    return Binaries(directory=directory, version=version, sha256=dict(sums), source=source)


def agreed_version(directory: Path, expected_version: str | None, progress: Progress) -> str:
    """The one supported version all the binaries in `directory` print for --version."""
    missing = [name for name in BINARIES if not (directory / name).is_file()]
    if missing:
        raise BinariesError(f"{directory} lacks {', '.join(missing)} (expected {', '.join(BINARIES)})")
    versions = {}
    with progress.step(f"verify --version of the binaries in {directory}"):
        for name in BINARIES:
            versions[name] = binary_version(directory / name)
            progress.note(f"  {name}: Kubernetes {versions[name]}")
    distinct = sorted(set(versions.values()))
    if len(distinct) > 1:
        listing = ", ".join(f"{name} {version}" for name, version in versions.items())
        raise BinariesError(f"the binaries in {directory} disagree on their version: {listing}")
    version = supported_version(distinct[0], f"{directory}/{BINARIES[0]} --version")
    if expected_version is not None and version != expected_version:
        raise BinariesError(f"the binaries in {directory} are {version}, expected {expected_version}")
    return version


def binary_version(binary: Path) -> str:
    """What `binary --version` reports, e.g. v1.36.3 from `Kubernetes v1.36.3`."""
    if not os.access(binary, os.X_OK):
        raise BinariesError(f"{binary} is not executable (chmod +x it, or check the mount's noexec)")
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_SECONDS,
            check=False,
        )
    except OSError as exc:
        hint = " (a binary for another architecture?)" if exc.errno == errno.ENOEXEC else ""
        raise BinariesError(f"cannot run {binary} --version: {exc.strerror}{hint}") from None
    except subprocess.TimeoutExpired:
        raise BinariesError(f"{binary} --version did not finish in {VERSION_TIMEOUT_SECONDS} s") from None
    match = _VERSION_OUTPUT.search(done.stdout)
    if done.returncode != 0 or match is None:
        said = (done.stdout.strip() or done.stderr.strip())[:120]
        raise BinariesError(
            f"{binary} --version exited {done.returncode} printing {said!r}, expected 'Kubernetes vX.Y.Z'"
        )
    return match.group(1)


def _from_go(
    spec: str,
    cache_root: Path,
    expected_version: str | None,
    builder: Builder,
    progress: Progress,
    environ: Mapping[str, str],
    build: bool,
) -> Binaries:
    version = supported_version(spec.removeprefix(GO_PREFIX), spec)
    if expected_version is not None and version != expected_version:
        raise BinariesError(f"{spec} asks for {version}, but {expected_version} is expected")
    try:
        toolchain = go_version(environ)
    except SourceError as exc:
        raise BinariesError(str(exc)) from None

    checked: list[str] = []

    def fill(work: Path) -> dict[str, Any]:
        fields = builder(version, work, progress)
        checked.append(agreed_version(work / BIN_DIR, version, progress))
        return dict(fields, source=spec, version=version, go_version=toolchain)

    try:
        entry = cached_entry(cache_root, f"{version}-{toolchain}", fill, progress, build=build)
    except NotCached:
        raise BinariesError(
            f"{spec} is not built yet for {toolchain} under {cache_root}; run `numalab k8s build --version {spec}`"
        ) from None
    source = f"{spec} built with {toolchain}"
    sums = read_sums(entry)
    return inspect_directory(entry / BIN_DIR, version, source, progress, sums, next(iter(checked), None))


def _from_tarball(tarball: Path, cache_root: Path, expected_version: str | None, progress: Progress) -> Binaries:
    with progress.step(f"sha512 of {tarball}"):
        try:
            digest = file_digest(tarball, "sha512")
        except OSError as exc:
            raise BinariesError(f"{tarball}: cannot read it: {exc.strerror}") from None
    if check_sha512(tarball, digest):
        progress.note(f"{tarball.name} matches its .sha512")

    checked: list[str] = []

    def fill(work: Path) -> dict[str, Any]:
        with progress.step(f"extract {', '.join(BINARIES)} from {tarball.name}"):
            extract_server_binaries(tarball, work / BIN_DIR)
        checked.append(agreed_version(work / BIN_DIR, expected_version, progress))
        return {"source": f"tarball {tarball}", "sha512": digest, "version": checked[0]}

    entry = cached_entry(cache_root, f"tarball-{digest[:32]}", fill, progress)
    source = f"tarball {tarball} (sha512 {digest[:16]}…)"
    sums = read_sums(entry)
    return inspect_directory(entry / BIN_DIR, expected_version, source, progress, sums, next(iter(checked), None))
