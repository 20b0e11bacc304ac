"""`numalab inspect` over real SSH (a loopback paramiko server) to the fake node's `numa-align inspect`."""

from __future__ import annotations

import json
import sys

import pytest

from numalab.cli import main
from numalab.inspect import quote_command
from tests.inspect.conftest import PINNED_UID
from tests.inspect.sshserver import loopback_ssh
from tests.inspect.test_older_kubelets import as_kubelet_1_20


@pytest.fixture
def ssh(tmp_path):
    with loopback_ssh() as server:
        key = tmp_path / "id_rsa"
        server.client_key.write_private_key_file(str(key))
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{server.port} {server.host_key.get_name()} {server.host_key.get_base64()}\n")
        config = tmp_path / "ssh_config"
        config.write_text(
            f"Host worker-1 jump\n  HostName 127.0.0.1\n  Port {server.port}\n  User root\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n\n"
            f"Host worker-2\n  HostName 127.0.0.1\n  Port {server.port}\n  User root\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  ProxyJump jump\n\n"
            f"Host stranger\n  HostName 127.0.0.1\n  Port {server.port}\n  User root\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {tmp_path / 'empty_known_hosts'}\n"
        )
        yield server, config


def node_command(node) -> str:
    return quote_command([sys.executable, "-m", "numa_align.inspect", *node.args])


def test_json_report_from_the_node(node, ssh, capsys):
    server, config = ssh
    code = main(["inspect", "worker-1", "--ssh-config", str(config), "--format", "json",
                 "--remote-command", node_command(node)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    report = json.loads(out)["worker-1"]
    pinned = report["pods"][1]
    assert (pinned["name"], pinned["uid"]) == ("pinned-1", PINNED_UID)
    assert pinned["containers"][0]["cpu_numa"] == [1]
    assert server.executed == [node_command(node) + " --format json"]


def test_table_through_a_proxy_jump(node, ssh, capsys):
    _, config = ssh
    code = main(["inspect", "worker-2", "--ssh-config", str(config), "--remote-command", node_command(node)])
    out, _ = capsys.readouterr()
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "== worker-2"
    assert lines[-1].split() == ["e2e/pinned-1", "app", "2", "1", "1", "numa-1x1", "ok"]


def test_a_kubelet_without_memory_manager_is_shown_not_failed(node, ssh, capsys):
    _, config = ssh
    as_kubelet_1_20(node)
    code = main(["inspect", "worker-1", "--ssh-config", str(config), "--remote-command", node_command(node)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "memory affinity not managed by this kubelet: no " in lines[1]
    assert lines[-1].split() == ["e2e/pinned-1", "app", "2", "1", "unmanaged", "numa-1x1", "ok"]


def test_unknown_host_key_is_refused(node, ssh, capsys):
    _, config = ssh
    code = main(["inspect", "stranger", "--ssh-config", str(config), "--remote-command", node_command(node)])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("numalab inspect: stranger: cannot connect to 127.0.0.1:")
    assert "not found in known_hosts" in err


def test_remote_failure_carries_the_remote_stderr(node, ssh, capsys):
    _, config = ssh
    (node.root / "kubelet" / "cpu_manager_state").unlink()
    code = main(["inspect", "worker-1", "--ssh-config", str(config), "--remote-command", node_command(node)])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert "worker-1: `" in err and "exited 1: numa-align inspect: cannot read" in err
    assert "cpu_manager_state: No such file or directory" in err


def test_missing_ssh_config_is_bad_input(tmp_path, capsys):
    code = main(["inspect", "worker-1", "--ssh-config", str(tmp_path / "absent")])
    assert code == 2
    assert capsys.readouterr().err == f"numalab inspect: --ssh-config {tmp_path / 'absent'}: no such file\n"
