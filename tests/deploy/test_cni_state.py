"""The CNI state of one boot on a tmpfs: the mount unit, enabled on every node, started at once only where no
pod holds a lease (a first deploy), never over live leases; and what it mounts."""

from __future__ import annotations

import configparser

from numalab.deploy import cni_state
from numalab.render import render
from tests.fakehost import fake_host


def planned(state: str) -> list[str]:
    """The commands the stage plans on a node whose CNI state is `state` (mounted, leases or empty)."""
    with fake_host(fake_responses={"mountpoint -q /var/lib/cni": state}) as host:
        cni_state.boot_scoped_cni_state()
        return [str(command) for op_hash in host.state.get_op_order()
                for command in host.state.get_op_data_for_host(host, op_hash).command_generator()]


def test_a_node_without_leases_mounts_the_tmpfs_now() -> None:
    commands = " | ".join(planned("empty"))
    assert "systemctl enable var-lib-cni.mount" in commands and "systemctl start var-lib-cni.mount" in commands
    same = [c for c in planned("mounted") if "Upload" not in c] == [c for c in planned("empty") if "Upload" not in c]
    assert same  # kept mounted (systemd's status makes the start a no-op there)


def test_live_leases_are_never_hidden_the_mount_waits_for_the_next_boot() -> None:
    commands = " | ".join(planned("leases"))
    assert "start" not in commands and "stop" not in commands


def test_the_unit_mounts_a_tmpfs_at_var_lib_cni_before_containerd_for_every_boot() -> None:
    unit = configparser.ConfigParser(strict=False)
    unit.read_string(render("k8s/var-lib-cni.mount.j2", unit=cni_state.UNIT, path=cni_state.PATH, size=cni_state.SIZE))
    assert unit["Mount"]["What"] == "tmpfs" and unit["Mount"]["Type"] == "tmpfs"
    assert unit["Mount"]["Where"] == "/var/lib/cni" and cni_state.UNIT == "var-lib-cni.mount"  # systemd's name
    assert "containerd.service" in unit["Unit"]["Before"] and unit["Install"]["WantedBy"] == "local-fs.target"
