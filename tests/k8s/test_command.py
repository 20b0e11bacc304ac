"""`numalab k8s build|version` through the real CLI entry point."""

from __future__ import annotations

import json

from numalab.cli import main
from numalab.k8s.versions import BINARIES
from tests.k8s.fakebinaries import fake_binaries, fake_server_tarball


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_of_a_directory_prints_version_and_directory(tmp_path, capsys):
    directory = fake_binaries(tmp_path / "bin")
    code, out, err = run(capsys, "k8s", "version", str(directory), "--cache-dir", str(tmp_path / "c"))
    assert code == 0 and out == f"v1.36.3 {directory}\n"
    assert "  kubelet: Kubernetes v1.36.3" in err


def test_version_json_of_a_tarball_lands_in_the_cache_dir(tmp_path, capsys):
    tarball = fake_server_tarball(tmp_path / "server.tar.gz")
    argv = ["k8s", "version", str(tarball), "--cache-dir", str(tmp_path / "c"), "--json", "--quiet"]
    code, out, err = run(capsys, *argv)
    fields = json.loads(out)
    assert code == 0 and err == ""
    assert fields["version"] == "v1.36.3" and fields["directory"].startswith(str(tmp_path / "c" / "tarball-"))
    assert sorted(fields["sha256"]) == sorted(BINARIES)
    assert "kube-proxy" in fields["sha256"]


def test_version_refuses_other_than_expected_with_exit_2(tmp_path, capsys):
    directory = fake_binaries(tmp_path / "bin", "v1.35.1")
    code, out, err = run(capsys, "k8s", "version", str(directory), "--expect", "v1.36.3", "--quiet")
    assert code == 2 and out == ""
    assert err == f"numalab k8s: the binaries in {directory} are v1.35.1, expected v1.36.3\n"


def test_version_does_not_build_go_specs(tmp_path, capsys):
    code, out, err = run(capsys, "k8s", "version", "go:v1.36.3", "--cache-dir", str(tmp_path), "--quiet")
    assert code == 2 and out == "" and "is not built yet" in err and err.count("\n") == 1


def test_build_refuses_a_version_outside_the_policy(tmp_path, capsys):
    code, out, err = run(capsys, "k8s", "build", "--version", "v1.19.0", "--cache-dir", str(tmp_path))
    assert code == 2 and out == ""
    assert err.endswith("numalab k8s: go:v1.19.0: v1.19.0 is older than v1.21, the oldest release numa-lab supports "
                        "(its kubelet lacks the memory manager flags)\n")
