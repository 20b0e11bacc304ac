"""numa-align for a node's Python, built on the controller: a wheel of plugin/ and wheels of its pinned
dependencies (plugin/node-requirements.txt) for that Python on manylinux x86_64. Nodes install from it
with `pip --no-index`, so they need no package index. Cached by the inputs' hash, behind a file lock.

Below both the deploy stages (the systemd install) and the images (the DaemonSet's image installs the same
wheels), so neither imports the other."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from numalab.files import file_lock
from numalab.progress import step

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugin"
REQUIREMENTS = PLUGIN_DIR / "node-requirements.txt"
PLATFORM = "manylinux2014_x86_64"


class WheelhouseError(RuntimeError):
    """pip could not build or download a wheel; the message names the step and pip's last lines."""


def inputs_digest(python_version: str) -> str:
    """Hash of what decides the wheelhouse: the plugin's sources and pyproject, the pins, the node's Python."""
    digest = hashlib.sha256(python_version.encode())
    for path in sorted([*PLUGIN_DIR.glob("numa_align/**/*.py"), PLUGIN_DIR / "pyproject.toml", REQUIREMENTS]):
        digest.update(str(path.relative_to(PLUGIN_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def wheelhouse(python_version: str, cache_root: Path) -> Path:
    """The directory of wheels for CPython `python_version` (e.g. "3.13"), building it on first use."""
    target = cache_root / f"numa-align-py{python_version}-{inputs_digest(python_version)}"
    with file_lock(cache_root / f"{target.name}.lock"):
        if target.is_dir():
            return target
        work = target.with_name(target.name + ".build")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        with step(f"numa-align wheelhouse for Python {python_version}"):
            _pip(["wheel", "--no-deps", "--no-build-isolation", "-w", str(work), str(PLUGIN_DIR)], "plugin wheel")
            _pip(["download", "--only-binary=:all:", "--platform", PLATFORM, "--implementation", "cp",
                  "--python-version", python_version, "-d", str(work), "-r", str(REQUIREMENTS)],
                 "dependency wheels")
        work.rename(target)
    return target


def _pip(args: list[str], what: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise WheelhouseError(f"numa-align {what}: pip {args[0]} failed (exit {done.returncode}): {tail}")
