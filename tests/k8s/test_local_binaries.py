"""Binaries a user supplies, as a directory or an upstream server tarball: checked before any host is touched."""

from __future__ import annotations

import hashlib
import tarfile

import pytest

from numalab.k8s.binaries import resolve_binaries
from numalab.k8s.errors import BinariesError
from numalab.k8s.versions import BINARIES
from tests.k8s.fakebinaries import RecordingProgress, fake_binaries, fake_binary, fake_server_tarball


def resolve(spec, tmp_path, expected=None, progress=None):
    return resolve_binaries(str(spec), tmp_path / "cache", expected, progress=progress or RecordingProgress())


def test_directory_is_used_in_place_with_its_sums(tmp_path):
    directory = fake_binaries(tmp_path / "bin")
    binaries = resolve(directory, tmp_path, "v1.36.3")
    assert binaries.directory == directory.resolve()
    assert binaries.version == "v1.36.3"
    assert binaries.sha256 == {n: hashlib.sha256((directory / n).read_bytes()).hexdigest() for n in BINARIES}
    assert binaries.source == f"directory {directory.resolve()}"
    assert binaries.path("kubelet") == directory / "kubelet"
    assert not (tmp_path / "cache").exists()


def test_version_other_than_expected_is_refused(tmp_path):
    directory = fake_binaries(tmp_path / "bin", "v1.35.2")
    with pytest.raises(BinariesError, match=r"are v1\.35\.2, expected v1\.36\.3"):
        resolve(directory, tmp_path, "v1.36.3")


def test_binaries_that_disagree_are_refused_naming_each(tmp_path):
    directory = fake_binaries(tmp_path / "bin", versions={"kube-scheduler": "v1.36.2"})
    disagreement = r"disagree on their version: kubelet v1\.36\.3, .*kube-scheduler v1\.36\.2"
    with pytest.raises(BinariesError, match=disagreement):
        resolve(directory, tmp_path)


def test_missing_binary_is_named(tmp_path):
    directory = fake_binaries(tmp_path / "bin")
    (directory / "kube-controller-manager").unlink()
    with pytest.raises(BinariesError, match=r"lacks kube-controller-manager \(expected kubelet,"):
        resolve(directory, tmp_path)


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        ("#!/bin/sh\necho 'Kubernetes v1.36.3'\n", 0o644, "is not executable"),
        ("#!/bin/sh\necho hello\n", 0o755, r"printing 'hello', expected 'Kubernetes vX\.Y\.Z'"),
        ("#!/bin/sh\necho 'Kubernetes v1.36.3'; exit 1\n", 0o755, "exited 1"),
        ("\x7fELF-not-really", 0o755, r"Exec format error \(a binary for another architecture\?\)"),
    ],
)
def test_binary_that_does_not_answer_version_is_refused(tmp_path, content, mode, message):
    directory = fake_binaries(tmp_path / "bin")
    (directory / "kubelet").write_text(content)
    (directory / "kubelet").chmod(mode)
    with pytest.raises(BinariesError, match=message):
        resolve(directory, tmp_path)


@pytest.mark.parametrize(("version", "message"), [("v1.20.15", "older than v1.21"), ("v1.36.3-dirty", "not a")])
def test_versions_outside_the_policy_are_refused(tmp_path, version, message):
    with pytest.raises(BinariesError, match=message):
        resolve(fake_binaries(tmp_path / "bin", version), tmp_path)


def test_unusable_paths_are_refused_naming_them(tmp_path):
    with pytest.raises(BinariesError, match=r"/nope: no such directory or tarball \(expected go:vX\.Y\.Z"):
        resolve(tmp_path / "nope", tmp_path)
    plain = tmp_path / "plain"
    plain.write_text("x")
    with pytest.raises(BinariesError, match=r"plain/kubelet: cannot read it: Not a directory"):
        resolve(plain / "kubelet", tmp_path)
    with pytest.raises(BinariesError, match="neither a directory nor a regular file"):
        resolve("/dev/null", tmp_path)
    with pytest.raises(BinariesError, match=r"plain: not a readable tar archive"):
        resolve(plain, tmp_path)


def test_tarball_is_extracted_into_the_cache_once(tmp_path):
    tarball = fake_server_tarball(tmp_path / "kubernetes-server-linux-amd64.tar.gz")
    digest = hashlib.sha512(tarball.read_bytes()).hexdigest()
    first = RecordingProgress()
    binaries = resolve(tarball, tmp_path, "v1.36.3", first)
    assert binaries.directory == tmp_path / "cache" / f"tarball-{digest[:32]}" / "bin"
    assert sorted(p.name for p in binaries.directory.iterdir()) == sorted(BINARIES)
    assert binaries.version == "v1.36.3" and binaries.source.startswith(f"tarball {tarball}")
    assert first.saw("extract kubelet")
    again = RecordingProgress()
    assert resolve(tarball, tmp_path, "v1.36.3", again) == binaries
    assert again.saw("check cached") and not again.saw("extract kubelet")


@pytest.mark.parametrize("suffix", ["", "  kubernetes-server-linux-amd64.tar.gz"])
def test_tarball_matching_its_sha512_file_is_accepted(tmp_path, suffix):
    tarball = fake_server_tarball(tmp_path / "kubernetes-server-linux-amd64.tar.gz")
    digest = hashlib.sha512(tarball.read_bytes()).hexdigest()
    (tmp_path / f"{tarball.name}.sha512").write_text(digest.upper() + suffix + "\n")
    progress = RecordingProgress()
    assert resolve(tarball, tmp_path, progress=progress).version == "v1.36.3"
    assert progress.saw("matches its .sha512")


@pytest.mark.parametrize(
    ("sums", "message"),
    [("0" * 128, "the download is damaged"), ("not-a-digest", "does not start with a sha512 hex digest"), ("", "")],
)
def test_tarball_with_a_bad_sha512_file_is_refused_before_extraction(tmp_path, sums, message):
    tarball = fake_server_tarball(tmp_path / "kubernetes-server-linux-amd64.tar.gz")
    (tmp_path / f"{tarball.name}.sha512").write_text(sums)
    with pytest.raises(BinariesError, match=message or "does not start with a sha512"):
        resolve(tarball, tmp_path)
    assert not (tmp_path / "cache").exists()


def test_tarball_without_a_binary_leaves_nothing_in_the_cache(tmp_path):
    tarball = fake_server_tarball(tmp_path / "server.tar.gz", names=("kubelet", "kube-apiserver"))
    with pytest.raises(BinariesError, match=r"has no kubernetes/server/bin/kube-controller-manager, kubernetes/"):
        resolve(tarball, tmp_path)
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_tarball_of_another_version_is_refused_and_not_cached(tmp_path):
    tarball = fake_server_tarball(tmp_path / "server.tar.gz", version="v1.35.0")
    with pytest.raises(BinariesError, match=r"are v1\.35\.0, expected v1\.36\.3"):
        resolve(tarball, tmp_path, "v1.36.3")
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_tarball_member_that_is_a_link_is_refused(tmp_path):
    tarball = tmp_path / "server.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        link = tarfile.TarInfo("kubernetes/server/bin/kubelet")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
        archive.add(fake_binary(tmp_path / "x"), arcname="kubernetes/server/bin/kube-apiserver")
    with pytest.raises(BinariesError, match="kubelet is not a regular file"):
        resolve(tarball, tmp_path)
