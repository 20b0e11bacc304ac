"""Stand-ins for kubelet & co.: shell scripts that answer `--version` like the real binaries."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from pathlib import Path

from numalab.k8s.versions import BINARIES
from numalab.progress import Progress


def fake_binary(path: Path, version: str = "v1.36.3") -> Path:
    path.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "Kubernetes {version}"\n')
    path.chmod(0o755)
    return path


def fake_binaries(directory: Path, version: str = "v1.36.3", versions: Mapping[str, str] | None = None) -> Path:
    """The four binaries in `directory`, each printing `version` (or its entry in `versions`)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in BINARIES:
        fake_binary(directory / name, (versions or {}).get(name, version))
    return directory


def fake_server_tarball(path: Path, version: str = "v1.36.3", names: tuple[str, ...] = BINARIES) -> Path:
    """A kubernetes-server-linux-amd64.tar.gz shaped like upstream's, holding `names` (plus unrelated files)."""
    staging = fake_binaries(path.parent / f"staging-{path.name}", version)
    with tarfile.open(path, "w:gz") as archive:
        readme = b"not a binary\n"
        info = tarfile.TarInfo("kubernetes/server/bin/kubelet.docker_tag")
        info.size = len(readme)
        archive.addfile(info, io.BytesIO(readme))
        for name in names:
            archive.add(staging / name, arcname=f"kubernetes/server/bin/{name}")
    return path


class RecordingProgress(Progress):
    """Keeps the progress lines (without their timestamps) for assertions."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def note(self, text: str) -> None:
        self.lines.append(text)

    def saw(self, fragment: str) -> bool:
        return any(fragment in line for line in self.lines)
