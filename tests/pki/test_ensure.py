"""ensure_pki keeps what still fits, re-issues only what changed, and never touches a CA it did not make."""

from __future__ import annotations

import logging
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from numalab.pki import ClusterPki, Host, PkiError, ensure_pki
from tests.pki.conftest import WORKERS, lab_spec, load


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file() and p.name != ".lock"
    }


def differing(before: dict[str, tuple[bytes, int]], after: dict[str, tuple[bytes, int]]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def test_second_call_changes_nothing(pki: ClusterPki) -> None:
    before = snapshot(pki.directory)
    copy = pki.admin_kubeconfig
    assert copy is not None
    admin = copy.read_bytes(), copy.stat().st_mtime_ns
    again = ensure_pki(lab_spec(), pki.directory, admin_kubeconfig=copy)
    assert again.changed == () and again.reasons == {}
    assert again.files == pki.files
    assert snapshot(pki.directory) == before
    assert (copy.read_bytes(), copy.stat().st_mtime_ns) == admin


def test_new_server_address_reissues_apiserver_and_url_bearing_kubeconfigs(pki: ClusterPki) -> None:
    before = snapshot(pki.directory)
    again = ensure_pki(lab_spec(server=Host("server", "10.77.0.20")), pki.directory)
    kubelet_confs = {f"nodes/{n.name}/kubelet.conf" for n in WORKERS}
    assert set(again.changed) == {"apiserver.crt", "apiserver.key", "admin.conf", "kube-proxy.conf",
                                  "numa-align.conf", *kubelet_confs}
    assert differing(before, snapshot(pki.directory)) == set(again.changed)
    assert again.reasons["apiserver.crt"] == "SANs differ"
    assert again.reasons["admin.conf"] == "server URL or credentials changed"
    assert b"https://10.77.0.20:6443" in again.read("nodes/worker-1/kubelet.conf")


def test_new_node_adds_only_its_files(pki: ClusterPki) -> None:
    before = snapshot(pki.directory)
    spec = lab_spec(nodes=(*WORKERS, Host("worker-3", "10.77.0.13")))
    again = ensure_pki(spec, pki.directory)
    new = {
        f"nodes/worker-3/{name}" for name in ("kubelet-client.crt", "kubelet-client.key", "kubelet.crt", "kubelet.key")
    }
    new.add("nodes/worker-3/kubelet.conf")
    assert set(again.changed) == new
    assert differing(before, snapshot(pki.directory)) == new
    assert (
        load(again, "nodes/worker-3/kubelet.crt").subject.rfc4514_string() == "CN=system:node:worker-3,O=system:nodes"
    )


def test_leaf_expiring_within_30_days_is_reissued(pki_dir: Path) -> None:
    now = datetime.now(UTC)
    ensure_pki(lab_spec(), pki_dir, now=now - timedelta(days=340))
    again = ensure_pki(lab_spec(), pki_dir, now=now)
    assert "apiserver.crt" in again.changed and "registry.crt" in again.changed
    assert again.reasons["registry.crt"].startswith("expires on ")
    assert not {"ca.crt", "ca.key", "sa.key", "sa.pub"} & set(again.changed)
    assert load(again, "registry.crt").not_valid_after_utc > now + timedelta(days=364)


def test_hand_edited_leaf_is_replaced(pki: ClusterPki) -> None:
    (pki.directory / "scheduler.crt").write_bytes(pki.read("admin.crt"))  # a cert of another key and subject
    again = ensure_pki(lab_spec(), pki.directory)
    assert set(again.changed) == {"scheduler.crt", "scheduler.key", "scheduler.conf"}
    assert again.reasons["scheduler.crt"] == "certificate and key do not match"
    (pki.directory / "scheduler.key").write_bytes(b"garbage")
    assert ensure_pki(lab_spec(), pki.directory).reasons["scheduler.crt"].startswith("unreadable: ")


def test_new_ca_reissues_every_leaf_but_keeps_the_service_account_key(pki: ClusterPki) -> None:
    sa = pki.read("sa.key")
    (pki.directory / "ca.crt").unlink()
    (pki.directory / "ca.key").unlink()
    again = ensure_pki(lab_spec(), pki.directory)
    assert set(again.changed) == set(pki.files) - {"sa.key", "sa.pub"}
    assert again.reasons["apiserver.crt"] == "not signed by the current CA"
    assert again.read("sa.key") == sa


def test_mismatched_ca_key_is_refused(pki: ClusterPki, tmp_path: Path) -> None:
    other = ensure_pki(lab_spec(), tmp_path / "other")
    shutil.copy(other.path("ca.key"), pki.directory / "ca.key")
    before = snapshot(pki.directory)
    with pytest.raises(PkiError) as info:
        ensure_pki(lab_spec(), pki.directory)
    message = str(info.value)
    assert f"{pki.directory}/ca.crt and {pki.directory}/ca.key" in message
    assert "does not belong" in message and "BEGIN" not in message
    assert snapshot(pki.directory) == before


@pytest.mark.parametrize(("removed", "kept"), [("ca.crt", "ca.key"), ("ca.key", "ca.crt")])
def test_half_a_ca_is_refused(pki: ClusterPki, removed: str, kept: str) -> None:
    (pki.directory / removed).unlink()
    with pytest.raises(PkiError, match=f"{pki.directory}/{kept} exists but {pki.directory}/{removed} does not"):
        ensure_pki(lab_spec(), pki.directory)
    assert not (pki.directory / removed).exists()


def test_loose_modes_are_tightened_without_rewriting(pki: ClusterPki, caplog: pytest.LogCaptureFixture) -> None:
    key = pki.directory / "apiserver.key"
    os.chmod(key, 0o644)
    os.chmod(pki.directory / "nodes", 0o755)
    mtime = key.stat().st_mtime_ns
    with caplog.at_level(logging.WARNING, logger="numalab.pki"):
        again = ensure_pki(lab_spec(), pki.directory)
    assert again.changed == ()
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_mtime_ns == mtime
    assert (pki.directory / "nodes").stat().st_mode & 0o777 == 0o700
    assert "apiserver.key had mode 644" in caplog.text


def test_no_key_material_in_repr_or_logs(pki_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="numalab.pki"):
        pki = ensure_pki(lab_spec(), pki_dir)
    assert repr(pki).startswith(f"<ClusterPki {pki_dir}: 38 files, changed: ca.key, ca.crt, registry.key")
    for text in (repr(pki), str(pki), caplog.text):
        assert "BEGIN" not in text and "PRIVATE" not in text
    assert "pki: issued apiserver.crt (missing)" in caplog.text


def test_files_are_created_private_under_a_loose_umask(pki_dir: Path) -> None:
    old = os.umask(0)
    try:
        pki = ensure_pki(lab_spec(), pki_dir)
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in pki_dir.rglob("*") if p.is_file()} == {0o600}
    assert pki.directory.stat().st_mode & 0o777 == 0o700
