"""secret_file's commands run for real with sh on a temp directory: the secret is never readable with any
mode but the one asked for, not even between two commands, and lands by an atomic rename."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

import pytest
from pyinfra.api import FileUploadCommand

from numalab.deploy.operations import secret_file
from tests.fakehost import commands_of, fake_host, run_with_sh, upload_as_sftp

USER, GROUP = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
SECRET = b"token: s3cret\n"


def reachable(directory: Path, path: Path) -> bool:
    """Others can reach `path`: `directory` and each directory below it on the way let them in."""
    return all(stat.S_IMODE((directory / parent).stat().st_mode) & 0o001
               for parent in path.relative_to(directory).parents)


def readable_copies(directory: Path) -> dict[Path, int]:
    """Every file under `directory` holding SECRET that others can reach, with its mode."""
    return {path: stat.S_IMODE(path.stat().st_mode) for path in directory.rglob("*")
            if path.is_file() and path.read_bytes() == SECRET and reachable(directory, path)}


def run_secret_file(directory: Path, mode: str) -> list[dict[Path, int]]:
    """Plan secret_file on a fake host with no file at dest, run its commands; what was exposed after each."""
    dest = directory / "config.yaml"
    seen: list[dict[Path, int]] = []

    def upload(command: FileUploadCommand) -> None:
        upload_as_sftp(command)
        seen.append(readable_copies(directory))

    with fake_host():
        commands = commands_of(secret_file(content=SECRET, dest=str(dest), mode=mode, user=USER, group=GROUP))
    for command in commands:
        run_with_sh([command], upload)
        seen.append(readable_copies(directory))
    return seen


@pytest.fixture
def rke2_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "rke2"
    directory.mkdir()
    directory.chmod(0o755)  # like /etc/rancher/rke2
    return directory


@pytest.mark.parametrize("mode", ["600", "640"])
def test_the_secret_is_never_reachable_with_another_mode(rke2_dir: Path, mode: str) -> None:
    seen = run_secret_file(rke2_dir, mode)
    dest = rke2_dir / "config.yaml"
    assert all(set(copies) <= {dest} for copies in seen), seen
    assert all(copies[dest] == int(mode, 8) for copies in seen if copies), seen
    assert dest.read_bytes() == SECRET and stat.S_IMODE(dest.stat().st_mode) == int(mode, 8)
    assert (dest.stat().st_uid, dest.stat().st_gid) == (os.getuid(), os.getgid())
    assert sorted(p.name for p in rke2_dir.iterdir()) == ["config.yaml"]  # the staging directory is gone


def test_an_old_file_is_replaced_by_a_rename_not_rewritten_in_place(rke2_dir: Path) -> None:
    dest = rke2_dir / "config.yaml"
    dest.write_bytes(b"token: old\n")
    dest.chmod(0o644)
    old_inode = dest.stat().st_ino
    run_secret_file(rke2_dir, "600")
    assert dest.read_bytes() == SECRET and stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert dest.stat().st_ino != old_inode


def test_a_staging_directory_left_by_a_crash_is_replaced(rke2_dir: Path) -> None:
    stale = rke2_dir / ".config.yaml.numa-lab-new"
    stale.mkdir(mode=0o755)
    (stale / "config.yaml").write_bytes(b"half")
    run_secret_file(rke2_dir, "600")
    assert sorted(p.name for p in rke2_dir.iterdir()) == ["config.yaml"]
