"""Waiting for a guest: a timeout says which step never happened and the last answer seen.

A CI run once failed with only "SSH not ready after 600 s"; the wait now says whether sshd ever
answered and what ssh said last (e.g. a host key or login refused because cloud-init never applied the
seed), so the next such failure explains itself. Fakes stand in for libvirt and the guest.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from numalab.lab import readiness
from numalab.lab.readiness import SSHTimeout, wait_for_ssh


class Domain:
    def isActive(self) -> bool:  # noqa: N802 (libvirt's name)
        return True


def fake_host(tmp_path: Path, image: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        settings=SimpleNamespace(uri="qemu:///system", image=image),
        conn=SimpleNamespace(lookupByName=lambda name: Domain()),
        lab=SimpleNamespace(domain_name=lambda guest: f"lab-{guest.name}"),
        ssh_config=tmp_path / "ssh_config",
        console_log=lambda guest: f"/state/console/{guest.name}.log",
    )


@pytest.fixture
def sshd(monkeypatch):
    """A listener on 127.0.0.1 that sends an SSH banner to every connection."""
    server = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setattr(readiness, "SSH_PORT", server.getsockname()[1])

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"SSH-2.0-fake\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield
    server.close()


@pytest.fixture
def ssh_refused(tmp_path, monkeypatch):
    """`ssh` on PATH that fails as ssh does when the login is refused."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text("#!/bin/sh\necho 'root@10.0.0.2: Permission denied (publickey).' >&2\nexit 255\n")
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def guest(address: str = "127.0.0.1") -> SimpleNamespace:
    return SimpleNamespace(name="cloudy", address=ipaddress.IPv4Address(address))


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(readiness.time, "sleep", lambda seconds: None)


def test_banner_but_login_refused_names_what_ssh_said(tmp_path, sshd, ssh_refused):
    with pytest.raises(SSHTimeout) as caught:
        wait_for_ssh(fake_host(tmp_path, image="cloud.qcow2"), guest(), timeout=0.5)
    message = str(caught.value)
    assert "sshd answered first after 0 s" in message
    assert "last: ssh exited 255: root@10.0.0.2: Permission denied (publickey)." in message
    assert "see its console log /state/console/cloudy.log" in message


def test_no_banner_says_sshd_never_answered(tmp_path, monkeypatch):
    closed = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setattr(readiness, "SSH_PORT", closed.getsockname()[1])
    closed.close()  # nothing listens there now: connection refused
    with pytest.raises(SSHTimeout) as caught:
        wait_for_ssh(fake_host(tmp_path, image=None), guest(), timeout=0.3)
    assert "sshd never answered; last: no SSH banner: Connection refused" in str(caught.value)


def test_the_lab_image_is_ready_at_the_banner(tmp_path, sshd):
    assert wait_for_ssh(fake_host(tmp_path, image=None), guest(), timeout=5) < 5
