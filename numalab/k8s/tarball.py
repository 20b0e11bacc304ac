"""A kubernetes-server-linux-amd64.tar.gz a user supplies: its checksum and the binaries inside it.

Upstream publishes the server tarball with a `.sha512` beside it (dl.k8s.io/release/vX.Y.Z/...); when
that file sits next to the tarball it is checked. Only versions.BINARIES are read out of the archive,
by name, so no member can write outside the destination.
"""

from __future__ import annotations

import re
import shutil
import tarfile
import zlib
from pathlib import Path

from numalab.k8s.errors import BinariesError
from numalab.k8s.versions import BINARIES

SERVER_BIN = "kubernetes/server/bin"
_SHA512 = re.compile(r"^[0-9a-fA-F]{128}$")


def sums_file(tarball: Path) -> Path:
    """Where upstream's checksum of `tarball` sits: NAME.sha512 beside it."""
    return tarball.with_name(tarball.name + ".sha512")


def check_sha512(tarball: Path, digest: str) -> bool:
    """Compare `digest` with NAME.sha512 when it exists (hex, optionally followed by a file name).

    Returns whether a sums file was there; a mismatch or an unreadable sums file is refused.
    """
    path = sums_file(tarball)
    if not path.exists():
        return False
    try:
        words = path.read_text().split()
    except (OSError, UnicodeDecodeError) as exc:
        raise BinariesError(f"{path}: cannot read it: {exc}") from None
    if not words or not _SHA512.match(words[0]):
        raise BinariesError(f"{path} does not start with a sha512 hex digest (128 hex digits)")
    if words[0].lower() != digest:
        raise BinariesError(
            f"{tarball} has sha512 {digest[:16]}…, but {path} says {words[0][:16].lower()}…: "
            "the download is damaged or is not the file the sums file describes"
        )
    return True


def extract_server_binaries(tarball: Path, destination: Path) -> None:
    """Copy kubernetes/server/bin/{kubelet,...} out of `tarball` into destination/NAME (mode 0755)."""
    wanted = {f"{SERVER_BIN}/{name}": name for name in BINARIES}
    found: set[str] = set()
    try:
        with tarfile.open(tarball, "r|*") as archive:
            for member in archive:
                name = wanted.get(member.name.removeprefix("./"))
                if name is None:
                    continue
                if not member.isreg():
                    raise BinariesError(f"{tarball}: {member.name} is not a regular file")
                source = archive.extractfile(member)
                assert source is not None  # a regular member always has content
                with source, (destination / name).open("wb") as target:
                    shutil.copyfileobj(source, target)
                (destination / name).chmod(0o755)
                found.add(name)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BinariesError(f"{tarball}: not a readable tar archive ({exc})") from None
    missing = [name for name in BINARIES if name not in found]
    if missing:
        raise BinariesError(
            f"{tarball} has no {', '.join(f'{SERVER_BIN}/{name}' for name in missing)} "
            "(expected the upstream kubernetes-server-linux-amd64.tar.gz layout)"
        )
