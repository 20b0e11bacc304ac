"""NUMALAB_URI=qemu+ssh://...: a lab on a "remote" libvirt host, reached only through SSH.

The remote host is this machine behind its own sshd (bound to 127.0.0.1 on a free port, own host key,
an authorized key the test generates). libvirt's ssh transport connects through it with that key and
verifies its host key against a known_hosts the test writes (libvirt's plain `ssh` ignores the URI's
`known_hosts`, so its `command` parameter names a wrapper that makes ssh use that file; the lab's
jump host reads `keyfile` and `known_hosts` from the same URI). One guest is brought up through
pyinfra: its disks reach the pool through libvirt streams and SSH to it jumps through that sshd.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import libvirt
import pytest
import testinfra

from numalab.lab.remote import JUMP_ALIAS
from tests.lab.conftest import (
    free_subnet,
    lab_env,
    lab_of_inventory_with_env,
    leftovers,
    run_numalab,
    run_pyinfra,
    write_inventory,
)

pytestmark = pytest.mark.lab

SSHD = Path("/usr/sbin/sshd")
GUEST = {"name": "far", "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi"}]}}


@dataclass(frozen=True)
class LibvirtHost:
    port: int
    client_key: Path
    known_hosts: Path
    ssh_wrapper: Path
    log: Path

    def uri(self, known_hosts: Path | None = None) -> str:
        query = urllib.parse.urlencode(
            {
                "keyfile": self.client_key,
                "known_hosts": known_hosts or self.known_hosts,
                "command": self.ssh_wrapper if known_hosts is None else _wrapper(known_hosts),
            }
        )
        return f"qemu+ssh://root@127.0.0.1:{self.port}/system?{query}"


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])


def _wrapper(known_hosts: Path) -> Path:
    """An ssh for libvirt's `command` URI parameter that checks the host key against `known_hosts` only."""
    wrapper = known_hosts.with_name(known_hosts.name + ".ssh")
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec ssh -o UserKnownHostsFile={known_hosts} -o GlobalKnownHostsFile=/dev/null "
        '-o StrictHostKeyChecking=yes "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def libvirt_host(tmp_path: Path) -> Iterator[LibvirtHost]:
    if not SSHD.exists():
        pytest.fail(f"{SSHD} is missing: run scripts/host-prep.sh (package openssh-server)")
    d = tmp_path / "sshd"
    d.mkdir()
    host_public = _keygen(d / "host_ed25519")
    client_public = _keygen(d / "client_ed25519")
    (d / "authorized_keys").write_text(client_public + "\n")
    port = _free_port()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nHostKey {d / 'host_ed25519'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nStrictModes no\nAllowTcpForwarding yes\nPidFile {d / 'sshd.pid'}\nLogLevel DEBUG1\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = d / "sshd.log"
    with log.open("w") as out:
        sshd = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(d / "sshd_config"), "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if sshd.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"sshd did not listen on 127.0.0.1:{port}: {log.read_text()}")
                time.sleep(0.1)
        yield LibvirtHost(port, d / "client_ed25519", d / "known_hosts", _wrapper(d / "known_hosts"), log)
    finally:
        sshd.terminate()
        try:
            sshd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sshd.kill()
            sshd.wait()


def test_remote_uri_uploads_disks_and_jumps_through_the_libvirt_host(libvirt_host: LibvirtHost, tmp_path: Path) -> None:
    # The host key is really checked: a known_hosts with another key refuses the connection.
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{libvirt_host.port} {_keygen(tmp_path / 'other')}\n")
    with pytest.raises(libvirt.libvirtError):
        libvirt.open(libvirt_host.uri(known_hosts=wrong))
    assert "Accepted publickey" not in libvirt_host.log.read_text()  # refused before authenticating

    uri = libvirt_host.uri()
    env = lab_env(f"pytest-remote-{os.getpid()}", tmp_path / "state", free_subnet())
    env["NUMALAB_URI"] = uri
    inventory = write_inventory(tmp_path / "inventory.py", [GUEST])
    lab = lab_of_inventory_with_env(inventory, env)
    guest = lab.guest("far")
    state_dir = lab.settings.state_dir
    try:
        result = run_pyinfra(inventory, env, "exec", "--", "hostname")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "[@kvm/far] far" in result.stdout + result.stderr

        conn = libvirt.open(uri)
        try:
            pool = conn.storagePoolLookupByName(lab.settings.object_name)
            pool.refresh(0)
            volumes = set(pool.listVolumes())
        finally:
            conn.close()
        assert {"far.qcow2", "far-seed.iso", "far-console.log"} <= volumes
        assert {name.split("-")[0] for name in volumes if name.startswith(("base-", "vmlinuz-", "initrd-"))} == {
            "base",
            "vmlinuz",
            "initrd",
        }

        ssh_config = state_dir / "ssh_config"
        config = ssh_config.read_text()
        assert f"ProxyJump {JUMP_ALIAS}" in config
        assert f"Port {libvirt_host.port}" in config and f"UserKnownHostsFile {libvirt_host.known_hosts}" in config
        host = testinfra.get_host("ssh://far", ssh_config=str(ssh_config))
        assert host.check_output("hostname") == "far"
        assert host.file("/sys/devices/system/node/online").content_string.strip() == "0"
        generated = (state_dir / "keys" / "hosts" / "far_ed25519.pub").read_text().split()[:2]
        assert host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2] == generated
        plain = subprocess.run(
            ["ssh", "-F", str(ssh_config), "far", "cat /proc/sys/kernel/hostname"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert plain.returncode == 0 and plain.stdout.strip() == "far", plain.stderr
        # Every SSH session to the guest went through the libvirt host's sshd as a forwarded channel.
        assert f"target {guest.address} port 22" in libvirt_host.log.read_text()

        status = run_numalab(inventory, env, "status")
        assert status.returncode == 0 and "running" in status.stdout, status.stdout + status.stderr
    finally:
        destroyed = run_numalab(inventory, env, "destroy")
        again = run_numalab(inventory, env, "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert "removed domain" in destroyed.stdout and "removed pool" in destroyed.stdout
    assert again.returncode == 0 and "nothing to remove" in again.stdout, again.stdout + again.stderr
    assert leftovers(lab) == []
