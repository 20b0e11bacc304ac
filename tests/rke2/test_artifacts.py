"""The airgap artifact set and the join token on the controller, and the node-side stage commands run with sh
on a temporary stage: a bad set must fail naming the file and leave nothing staged."""

from __future__ import annotations

import hashlib
import re
import stat
import subprocess
from pathlib import Path

import pytest

from numalab.deploy.rke2.install import download_command, install_commands, verify_command
from numalab.model import rke2_install as spec
from numalab.rke2.artifacts import ArtifactError, check_artifact_set
from numalab.rke2.token import TOKEN_FILE, ensure_token
from tests.rke2.fabricated import make_artifact_set, tamper

TARBALL = "rke2.linux-amd64.tar.gz"
ZST = "rke2-images.linux-amd64.tar.zst"
SUMS = "sha256sum-amd64.txt"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def artifact_error(directory: Path) -> str:
    with pytest.raises(ArtifactError) as caught:
        check_artifact_set(directory)
    return str(caught.value)


@pytest.mark.parametrize("images", ["tar.zst", "tar.gz"])
def test_a_good_set_is_checked_with_either_images_archive(tmp_path: Path, images: str) -> None:
    make_artifact_set(tmp_path, images=images)
    checked = check_artifact_set(tmp_path)
    assert [a.name for a in checked.files] == [SUMS, TARBALL, f"rke2-images.linux-amd64.{images}"]
    assert all(a.sha256 == sha256(a.path) for a in checked.files)


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    assert str(tmp_path / "nowhere") in artifact_error(tmp_path / "nowhere")


def test_a_missing_sums_file_is_named(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    (tmp_path / SUMS).unlink()
    assert f"{tmp_path / SUMS} is missing" in artifact_error(tmp_path)


def test_a_set_without_images_names_both_archives(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    (tmp_path / ZST).unlink()
    message = artifact_error(tmp_path)
    assert ZST in message and "rke2-images.linux-amd64.tar.gz" in message


def test_a_missing_tarball_is_named(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    (tmp_path / TARBALL).unlink()
    assert f"{tmp_path / TARBALL} is missing" in artifact_error(tmp_path)


def test_a_file_the_sums_file_does_not_list_is_named(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    sums = tmp_path / SUMS
    sums.write_text("".join(line + "\n" for line in sums.read_text().splitlines() if not line.endswith(TARBALL)))
    message = artifact_error(tmp_path)
    assert str(sums) in message and f"no sum for {TARBALL}" in message


def test_a_tampered_file_does_not_match(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    tamper(tmp_path / ZST)
    message = artifact_error(tmp_path)
    assert f"{tmp_path / ZST} does not match {SUMS}" in message


def test_a_malformed_sums_file_is_an_artifact_error_naming_the_line(tmp_path: Path) -> None:
    make_artifact_set(tmp_path)
    (tmp_path / SUMS).write_text("not a sums line\n")
    assert f"{tmp_path / SUMS}:1" in artifact_error(tmp_path)


def test_the_token_is_made_once_private_and_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    token = ensure_token(state)
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert stat.S_IMODE((state / TOKEN_FILE).stat().st_mode) == 0o600
    assert ensure_token(state) == token
    assert (state / TOKEN_FILE).read_text().strip() == token


def test_two_state_dirs_get_different_tokens(tmp_path: Path) -> None:
    assert ensure_token(tmp_path / "a") != ensure_token(tmp_path / "b")


def test_an_empty_token_file_is_refused_not_replaced(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text("\n")
    with pytest.raises(ValueError, match="is empty; remove it"):
        ensure_token(tmp_path)
    assert (tmp_path / TOKEN_FILE).read_text() == "\n"


def run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A staged fabricated set; the commands read spec.STAGE_DIR when built, so they act on it."""
    directory = make_artifact_set(tmp_path / "stage")
    monkeypatch.setattr(spec, "STAGE_DIR", str(directory))
    return directory


def test_verify_command_passes_a_good_stage(stage: Path) -> None:
    result = run(verify_command([TARBALL, ZST]))
    assert result.returncode == 0, result.stderr
    assert (stage / TARBALL).is_file()


def test_verify_command_reads_binary_and_path_sums_lines(stage: Path) -> None:
    """The node reads the same sums forms as parse_sums on the controller."""
    (stage / SUMS).write_text(f"{sha256(stage / TARBALL)} *./release/{TARBALL}\n{sha256(stage / ZST)}  {ZST}\n")
    result = run(verify_command([TARBALL, ZST]))
    assert result.returncode == 0, result.stderr


def test_verify_command_fails_on_a_tampered_file_and_removes_the_stage(stage: Path) -> None:
    tamper(stage / ZST)
    result = run(verify_command([TARBALL, ZST]))
    assert result.returncode == 1
    assert f"{ZST} does not match {SUMS}" in result.stderr
    assert not stage.exists()


def test_verify_command_fails_on_a_file_without_a_sum(stage: Path) -> None:
    (stage / SUMS).write_text(f"{sha256(stage / ZST)}  {ZST}\n")
    result = run(verify_command([TARBALL, ZST]))
    assert result.returncode == 1
    assert f"{TARBALL} does not match" in result.stderr and "expected none" in result.stderr
    assert not stage.exists()


def test_a_failed_download_removes_the_stage(stage: Path) -> None:
    result = run(download_command("http://127.0.0.1:1"))
    assert result.returncode != 0
    assert "download from http://127.0.0.1:1 failed" in result.stderr
    assert not stage.exists()


def test_install_commands_use_absolute_paths_and_clear_the_stage() -> None:
    commands = install_commands("v1.31.4+rke2r1", TARBALL, ZST)
    assert f"cp {spec.STAGE_DIR}/{ZST} {spec.IMAGES_DIR}/{ZST}" in commands
    assert f"tar xzf {spec.STAGE_DIR}/{TARBALL} -C /usr/local" in commands
    assert any(c.endswith(f"> {spec.INSTALLED_MARKER}") for c in commands)
    assert commands[-1] == f"rm -rf {spec.STAGE_DIR}"
    assert spec.STAGE_DIR.startswith("/var/lib/numa-lab/") and spec.INSTALLED_MARKER.startswith("/var/lib/numa-lab/")
    assert not any(spec.IMAGES_DIR in c for c in install_commands("v1.31.4+rke2r1", TARBALL, None))
