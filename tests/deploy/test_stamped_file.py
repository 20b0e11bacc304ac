"""stamped_file run for real on this machine (@local) against temp files: the first run uploads and stamps, a
second run reads one stat and hashes nothing, and a file changed behind its stamp is hashed and put right."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from pyinfra.api.exceptions import PyinfraError

from numalab.deploy.operations import stamp_path, stamped_file
from numalab.files import sha256_of_file
from tests.fakehost import commands_of, execute, local_host

BINARY = b"\x7fELF pretend kubelet\n" * 1000


def run(src: Path, dest: Path, stamps: Path) -> list[str]:
    """Plan stamped_file once on @local and run it: the commands it planned (none when up to date)."""
    with local_host() as host:
        planned = [str(command) for command in commands_of(
            stamped_file(src=str(src), dest=str(dest), mode="755", stamps=str(stamps)))]
        execute(host)
    return planned


def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    src, dest, stamps = tmp_path / "cache" / "kubelet", tmp_path / "bin" / "kubelet", tmp_path / "stamps"
    src.parent.mkdir()
    dest.parent.mkdir()
    src.write_bytes(BINARY)
    return src, dest, stamps


def test_first_run_uploads_and_stamps_a_second_changes_nothing(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    first = run(src, dest, stamps)
    assert any("mv -f" in command for command in first), first
    assert dest.read_bytes() == BINARY and oct(dest.stat().st_mode & 0o777) == "0o755"
    stamp = Path(stamp_path(str(dest), str(stamps))).read_text().split()
    assert stamp[1:3] == [str(dest.stat().st_ino), str(dest.stat().st_size)], stamp
    assert run(src, dest, stamps) == []  # one stat: no hash, no upload, no stamp


def test_a_new_local_file_is_uploaded_over_the_old_one(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    run(src, dest, stamps)
    old_inode = dest.stat().st_ino
    src.write_bytes(BINARY + b"v2")
    assert run(src, dest, stamps) != []
    assert dest.read_bytes() == BINARY + b"v2" and dest.stat().st_ino != old_inode  # renamed into place
    assert run(src, dest, stamps) == []


def test_a_file_rewritten_behind_its_stamp_is_hashed_and_put_right(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    run(src, dest, stamps)
    dest.write_bytes(b"X" * len(BINARY))  # same size, same inode: only the mtime says it changed
    os.utime(dest, ns=(dest.stat().st_atime_ns, dest.stat().st_mtime_ns + 1))
    assert run(src, dest, stamps) != []
    assert dest.read_bytes() == BINARY
    assert run(src, dest, stamps) == []


def test_the_right_bytes_without_a_stamp_get_one_and_no_upload(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    dest.write_bytes(BINARY)  # put there by an older numa-lab, without a stamp
    dest.chmod(0o700)
    inode = dest.stat().st_ino
    planned = run(src, dest, stamps)
    assert planned and not any("mv -f" in command and "numa-lab-new" in command for command in planned), planned
    assert dest.stat().st_ino == inode and oct(dest.stat().st_mode & 0o777) == "0o755"
    assert Path(stamp_path(str(dest), str(stamps))).exists()
    assert run(src, dest, stamps) == []


def test_what_is_uploaded_is_the_gzip_copy_unpacked_and_checked_on_the_node(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    planned = run(src, dest, stamps)
    packed = sorted((src.parent / ".gz").glob("*.gz"))
    assert [p.name for p in packed] == [f"{sha256_of_file(src)}.gz"], packed  # kept by the content's digest
    assert packed[0].stat().st_size < len(BINARY) / 10  # what crosses SSH
    assert any("gzip -dc" in command and "sha256sum -c" in command for command in planned), planned
    assert dest.read_bytes() == BINARY
    assert not list(dest.parent.glob("*.numa-lab-new*"))  # nothing staged left beside it


def test_a_copy_that_does_not_unpack_to_the_binary_fails_and_leaves_the_old_file(tmp_path: Path) -> None:
    src, dest, stamps = setup(tmp_path)
    run(src, dest, stamps)
    src.write_bytes(BINARY + b"v2")
    wrong = src.parent / ".gz" / f"{sha256_of_file(src)}.gz"
    wrong.write_bytes(gzip.compress(b"not the binary"))  # a damaged cache entry
    with pytest.raises(PyinfraError):  # the run fails on the node's check (sha256sum: FAILED)
        run(src, dest, stamps)
    assert dest.read_bytes() == BINARY  # the file in place untouched
    assert not list(dest.parent.glob("*.numa-lab-new*"))
