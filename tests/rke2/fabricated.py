"""A FABRICATED RKE2 artifact set for tests: the file names and layout of a real release (tarball with
bin/rke2, the two systemd units and the helper scripts; an images archive; sha256sum-amd64.txt), none of
its content. bin/rke2 only prints that it is fabricated and exits 1, so nothing can mistake it for RKE2.
RKE2 itself cannot be downloaded on the project's machines."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

FABRICATED_NOTE = "numa-lab test fabrication, not RKE2"
UNIT = """[Unit]
Description=Rancher Kubernetes Engine v2 ({role}) -- {note}
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
ExecStart=/usr/local/bin/rke2 {role}

[Install]
WantedBy=multi-user.target
"""


def _member(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def make_artifact_set(directory: Path, version: str = "v1.31.4+rke2r1", images: str = "tar.zst") -> Path:
    """Write rke2.linux-amd64.tar.gz, rke2-images.linux-amd64.<images> and sha256sum-amd64.txt."""
    directory.mkdir(parents=True, exist_ok=True)
    tarball = directory / "rke2.linux-amd64.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        _member(tar, "bin/rke2", f"#!/bin/sh\necho 'rke2 version {version} ({FABRICATED_NOTE})'\nexit 1\n", 0o755)
        _member(tar, "bin/rke2-killall.sh", f"#!/bin/sh\necho '{FABRICATED_NOTE}'\n", 0o755)
        _member(tar, "bin/rke2-uninstall.sh", f"#!/bin/sh\necho '{FABRICATED_NOTE}'\n", 0o755)
        for role in ("server", "agent"):
            _member(tar, f"lib/systemd/system/rke2-{role}.service", UNIT.format(role=role, note=FABRICATED_NOTE))
            _member(tar, f"lib/systemd/system/rke2-{role}.env", "HOME=/root\n")
        _member(tar, "share/rke2/rke2-cis-sysctl.conf", f"# {FABRICATED_NOTE}\n")
    image_archive = directory / f"rke2-images.linux-amd64.{images}"
    image_archive.write_bytes(f"{FABRICATED_NOTE}: images archive for {version}\n".encode() * 64)
    sums = "".join(
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n" for path in (tarball, image_archive)
    )
    (directory / "sha256sum-amd64.txt").write_text(sums)
    return directory


def tamper(path: Path) -> None:
    """Change a file after its sum was recorded (one byte appended)."""
    with path.open("ab") as handle:
        handle.write(b"\0")
