"""The controller's store of Kubernetes binaries: one directory per source, either complete or absent.

    <cache_root>/<key>/bin/{kubelet,kube-apiserver,...}   (versions.BINARIES, or the entry's own `binaries`)
    <cache_root>/<key>/SHA256SUMS      (sha256sum format, relative to the entry: bin/NAME)
    <cache_root>/<key>/manifest.json   (where the binaries came from, their version and sums, seconds taken)

An entry is filled in <key>.build and renamed into place when complete, behind <key>.lock, so an
interrupted or parallel run never sees half of one. Entries are checked against their sums on every use;
a damaged one is rebuilt. Every entry holds one fixed set of binaries, versions.BINARIES by default;
other builds (numalab/k8s/coredns.py) name their own set and share the root, the lock and the checks.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from numalab.files import file_digest, file_lock
from numalab.k8s.errors import BinariesError
from numalab.k8s.versions import BINARIES
from numalab.lab.settings import settings_from_env
from numalab.progress import Progress

BIN_DIR = "bin"
SUMS_FILE = "SHA256SUMS"
MANIFEST_FILE = "manifest.json"

# Puts the binaries into work/bin (and anything else worth keeping into work), checks them, and
# returns the manifest's fields.
Fill = Callable[[Path], dict[str, Any]]


class NotCached(BinariesError):
    """The entry is not there and the caller asked not to build it."""


def default_cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """<image dir>/k8s: beside the lab's base images (NUMALAB_IMAGE_DIR, default ~/.local/share/numa-lab/images)."""
    settings = settings_from_env(os.environ if environ is None else environ)
    return settings.image_dir.expanduser() / "k8s"


def read_sums(entry: Path) -> dict[str, str]:
    """bin/NAME -> sha256 from an entry's SHA256SUMS, keyed by binary name."""
    sums: dict[str, str] = {}
    for line in (entry / SUMS_FILE).read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name.removeprefix(f"{BIN_DIR}/")] = digest
    return sums


def read_manifest(entry: Path) -> dict[str, Any]:
    return json.loads((entry / MANIFEST_FILE).read_text())


def entry_problem(entry: Path, *, binaries: tuple[str, ...] = BINARIES) -> str | None:
    """Why `entry` cannot be used as it is (a missing file, a binary whose sum changed), or None."""
    for name in (SUMS_FILE, MANIFEST_FILE):
        if not (entry / name).is_file():
            return f"no {name}"
    try:
        sums = read_sums(entry)
        read_manifest(entry)
    except (OSError, ValueError) as exc:
        return f"unreadable {SUMS_FILE} or {MANIFEST_FILE}: {exc}"
    for name in binaries:
        binary = entry / BIN_DIR / name
        if name not in sums:
            return f"{SUMS_FILE} lists no {name}"
        if not binary.is_file():
            return f"{BIN_DIR}/{name} is missing"
        actual = file_digest(binary)
        if actual != sums[name]:
            return f"{BIN_DIR}/{name} has sha256 {actual[:16]}…, {SUMS_FILE} says {sums[name][:16]}…"
    return None


def cached_entry(
    cache_root: Path, key: str, fill: Fill, progress: Progress, build: bool = True,
    *, binaries: tuple[str, ...] = BINARIES,
) -> Path:
    """The intact entry `key` under cache_root holding `binaries`, filling it first when missing or damaged.

    With build=False a missing entry raises NotCached instead of running `fill`.
    """
    entry = cache_root / key
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BinariesError(f"cannot create the binaries cache {cache_root}: {exc.strerror}") from None
    with file_lock(cache_root / f"{key}.lock"):
        if entry.exists():
            with progress.step(f"check cached {entry}"):
                problem = entry_problem(entry, binaries=binaries)
            if problem is None:
                return entry
            progress.note(f"cache entry {entry} is damaged ({problem}); removing and rebuilding it")
            shutil.rmtree(entry)
        if not build:
            raise NotCached(f"{key} is not in the cache {cache_root} yet")
        _fill(entry, fill, progress, binaries=binaries)
    return entry


def _fill(entry: Path, fill: Fill, progress: Progress, *, binaries: tuple[str, ...] = BINARIES) -> None:
    work = entry.with_name(entry.name + ".build")
    shutil.rmtree(work, ignore_errors=True)
    (work / BIN_DIR).mkdir(parents=True)
    started = time.monotonic()
    try:
        fields = fill(work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    with progress.step(f"sums of {', '.join(binaries)}"):
        sums = {name: file_digest(work / BIN_DIR / name) for name in binaries}
    (work / SUMS_FILE).write_text("".join(f"{sums[name]}  {BIN_DIR}/{name}\n" for name in binaries))
    manifest = dict(fields, sha256=sums, seconds=round(time.monotonic() - started, 1))
    (work / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    work.rename(entry)
    progress.note(f"cached in {entry}")
