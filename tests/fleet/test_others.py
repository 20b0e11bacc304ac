"""A bench run refuses to start beside another fleet control plane (numalab/fleet/others.py): its CPU would lower
every figure (100-node sides at 36.5 and 15 pods/s instead of 53 and 34 beside a leftover 5,000-node plane)."""

from __future__ import annotations

from pathlib import Path

from numalab.fleet import cli
from numalab.fleet.others import refusal, running_planes
from tests.fleet.test_controlplane import fake_binaries


def fake_proc(root: Path, processes: dict[int, list[str]]) -> Path:
    for pid, argv in processes.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (root / "self").mkdir()
    (root / "meminfo").write_text("MemTotal: 1 kB\n")
    return root


PLANE = "/tmp/numalab-fleet-abc123"
PROCESSES = {
    101: ["/cache/bin/etcd", "--name=fleet", f"--data-dir={PLANE}/etcd-data"],
    102: ["/cache/bin/kube-apiserver", "--etcd-servers=http://127.0.0.1:2379", f"--tls-cert-file={PLANE}/pki/a.crt"],
    103: ["/cache/bin/kwok", f"--kubeconfig={PLANE}/admin.conf"],
    200: ["/usr/bin/python3", "bench/fleet_scale.py", "--sizes", "100"],
    300: ["sshd: root"],
}


def test_a_planes_processes_are_found_by_their_directory(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", PROCESSES)
    assert running_planes(proc) == {PLANE: [(101, "etcd"), (102, "kube-apiserver"), (103, "kwok")]}
    assert running_planes(proc, own=[101, 102, 103]) == {}
    assert running_planes(fake_proc(tmp_path / "none", {300: ["sshd: root"]})) == {}


def test_the_refusal_names_the_plane_and_its_processes() -> None:
    assert refusal({}) is None
    said = refusal({PLANE: [(102, "kube-apiserver"), (101, "etcd")], "/tmp/numalab-fleet-x": [(9, "etcd")]})
    assert said == (f"another fleet control plane is running ({PLANE}: etcd (101), kube-apiserver (102)) and 1 "
                    "other plane(s); its CPU would lower every figure of this run: stop it first")


def test_the_bench_refuses_to_start_beside_one(tmp_path: Path, monkeypatch, capsys) -> None:
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    monkeypatch.setattr(cli, "running_planes", lambda own: {PLANE: [(101, "etcd")]})
    monkeypatch.setattr(cli, "run_side", lambda *args: (_ for _ in ()).throw(AssertionError("a side ran")))
    assert cli.main(["--sizes", "10", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"fleet_scale: another fleet control plane is running ({PLANE}: etcd (101)); its CPU would lower " \
                  "every figure of this run: stop it first\n"
