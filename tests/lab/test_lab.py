"""The lab from the inside: guests brought up by pyinfra show exactly the NUMA shape they declare.

Everything here talks to real guests (software-emulated QEMU on an isolated libvirt network) over
SSH with testinfra; see conftest.py for the session's `kvm_lab`.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
import pytest
from numa_align.cpulist import format_cpulist

from numalab.lab.domains import TCG_SINGLE_EMULATOR, single_threaded_tcg
from tests.lab.conftest import (
    BIN,
    LabGuest,
    RunningLab,
    free_subnet,
    lab_env,
    lab_of_inventory_with_env,
    leftovers,
    run_numalab,
    run_pyinfra,
    write_inventory,
)

pytestmark = pytest.mark.lab
GUESTS = ["two", "three"]


def results_row(output: str, label: str) -> list[str]:
    """The cells of a row of pyinfra's results table (printed on stderr), e.g. ["18", "-", "-", "18"]."""
    for line in output.splitlines():
        if line.strip().startswith(label):
            return line.strip()[len(label) :].split()
    raise AssertionError(f"no '{label}' row in pyinfra output:\n{output}")


@pytest.fixture(params=GUESTS)
def guest(request: pytest.FixtureRequest, kvm_lab: RunningLab) -> LabGuest:
    return kvm_lab.guests[request.param]


def test_nodes_online_and_cpulists(guest: LabGuest) -> None:
    node_dir = "/sys/devices/system/node"
    assert guest.host.file(f"{node_dir}/online").content_string.strip() == format_cpulist(guest.topology.ids)
    for cell in guest.topology.cells:
        assert guest.host.file(f"{node_dir}/node{cell.id}/cpulist").content_string.strip() == cell.cpulist


def test_memtotal_per_node_within_5_percent(guest: LabGuest) -> None:
    for cell in guest.topology.cells:
        meminfo = guest.host.file(f"/sys/devices/system/node/node{cell.id}/meminfo").content_string
        line = next(line for line in meminfo.splitlines() if "MemTotal:" in line)
        kib = int(line.split()[-2])
        declared_kib = cell.memory // 1024
        assert abs(kib - declared_kib) <= declared_kib * 0.05, (cell.id, kib, declared_kib)


def test_distance_rows(guest: LabGuest) -> None:
    topology = guest.topology
    for a in topology.ids:
        row = guest.host.file(f"/sys/devices/system/node/node{a}/distance").content_string.split()
        assert [int(value) for value in row] == [topology.distance(a, b) for b in topology.ids]


def test_non_default_distance_reaches_the_guest(kvm_lab: RunningLab) -> None:
    row = kvm_lab.guests["three"].host.file("/sys/devices/system/node/node0/distance").content_string.split()
    assert row == ["10", "20", "30"]


def test_cpuset_on_the_last_node_shows_in_proc_status(guest: LabGuest) -> None:
    last = guest.topology.cells[-1]
    cgroup = "/sys/fs/cgroup/numalab-probe"
    script = (
        "set -e; echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control; "
        f"mkdir -p {cgroup}; echo {last.cpulist} > {cgroup}/cpuset.cpus; echo {last.id} > {cgroup}/cpuset.mems; "
        f"sh -c 'echo $$ > {cgroup}/cgroup.procs; grep -E \"^(Cpus|Mems)_allowed_list\" /proc/$$/status'"
    )
    result = guest.host.run("sh -c %s", script)
    guest.host.run("rmdir %s", cgroup)
    assert result.rc == 0, result.stderr
    allowed = dict(line.split(":\t") for line in result.stdout.strip().splitlines())
    assert allowed == {"Cpus_allowed_list": last.cpulist, "Mems_allowed_list": str(last.id)}
    # A memory policy is not a cpuset: numactl --membind leaves Mems_allowed_list at every node.
    membind = guest.host.check_output("numactl --membind=%s grep Mems_allowed_list /proc/self/status", str(last.id))
    assert membind.split(":")[1].strip() == format_cpulist(guest.topology.ids)


def test_base_stage_applied(guest: LabGuest, kvm_lab: RunningLab) -> None:
    assert guest.host.check_output("hostname") == guest.name
    hosts = guest.host.file("/etc/hosts").content_string
    for other in kvm_lab.guests.values():
        assert f"{other.address} {other.name}" in hosts
    assert guest.host.file("/proc/swaps").content_string.strip().splitlines()[1:] == []
    modules = guest.host.check_output("cut -d' ' -f1 /proc/modules").split()
    assert {"br_netfilter", "overlay"} <= set(modules)
    assert guest.host.sysctl("net.ipv4.ip_forward") == 1
    assert guest.host.sysctl("net.bridge.bridge-nf-call-iptables") == 1


def test_guest_host_key_is_the_one_generated_on_the_controller(guest: LabGuest, kvm_lab: RunningLab) -> None:
    state_dir = kvm_lab.lab.settings.state_dir
    generated = (state_dir / "keys" / "hosts" / f"{guest.name}_ed25519.pub").read_text().split()[:2]
    in_guest = guest.host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
    assert in_guest == generated
    assert "StrictHostKeyChecking yes" in guest.ssh_config.read_text()
    assert f"{guest.address},{guest.name} {' '.join(generated)}" in (state_dir / "known_hosts").read_text()


def test_guests_reach_nothing_outside_the_lab(guest: LabGuest) -> None:
    routes = guest.host.check_output("ip -4 route show")
    assert "default" not in routes


def test_emulated_guests_run_one_tcg_thread_and_read_the_tsc(guest: LabGuest, kvm_lab: RunningLab) -> None:
    """Under software emulation, in a lab whose vCPUs outnumber the host's CPUs (8 on CI's 2 cores), a guest of
    several vCPUs runs scripts/qemu-tcg-single: one TCG thread for all its vCPUs. Every emulated guest's clock
    is the TSC, not the HPET QEMU emulates under its global lock."""
    conn = libvirt.open(kvm_lab.lab.settings.uri)
    try:
        domain = conn.lookupByName(kvm_lab.lab.domain_name(kvm_lab.lab.guest(guest.name)))
        root = ET.fromstring(domain.XMLDesc(0))
        pid = Path(f"/run/libvirt/qemu/{domain.name()}.pid").read_text().strip()
        lab_vcpus = sum(other.vcpus for other in kvm_lab.lab.guests)
        single = single_threaded_tcg(root.get("type"), int(root.findtext("vcpu")), lab_vcpus, conn.getInfo()[2])
    finally:
        conn.close()
    clock = guest.host.file("/sys/devices/system/clocksource/clocksource0/current_clocksource").content_string
    threads = sorted(path.read_text().strip() for path in Path(f"/proc/{pid}/task").glob("*/comm"))
    tcg = [name for name in threads if name.endswith("/TCG")]
    if single:
        assert root.findtext("./devices/emulator") == TCG_SINGLE_EMULATOR
        assert tcg == ["ALL CPUs/TCG"], threads
    else:
        assert root.findtext("./devices/emulator") != TCG_SINGLE_EMULATOR
        assert "ALL CPUs/TCG" not in tcg, threads
    if root.get("type") == "qemu":
        assert clock.strip() == "tsc"


def test_second_deploy_run_changes_nothing(kvm_lab: RunningLab) -> None:
    assert kvm_lab.first_run is not None
    first = kvm_lab.first_run.stdout + kvm_lab.first_run.stderr
    hosts, success, error, _ = results_row(first, "Grand total")
    assert success != "-" and error == "-"
    second = kvm_lab.pyinfra(str(Path(__file__).resolve().parents[2] / "deploys" / "cluster.py"))
    assert second.returncode == 0, second.stdout + second.stderr
    assert results_row(second.stdout + second.stderr, "Grand total") == [hosts, "-", "-", hosts]


def test_status_lists_guests_state_address_and_shape(kvm_lab: RunningLab) -> None:
    result = kvm_lab.numalab("status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["lab"] == kvm_lab.lab.settings.name
    rows = {row["name"]: row for row in status["guests"]}
    assert {name: row["state"] for name, row in rows.items()} == {"two": "running", "three": "running"}
    assert {name: row["address"] for name, row in rows.items()} == {
        name: guest.address for name, guest in kvm_lab.guests.items()
    }
    assert rows["three"]["shape"] == "3 cells: 0/2048Mi 1/768Mi 2/512Mi distances 10,20,30;20,10,20;30,20,10"
    table = kvm_lab.numalab("status")
    assert "two" in table.stdout and "running" in table.stdout


def test_boot_finishes_soon_after_ssh(guest: LabGuest) -> None:
    """Nothing holds the boot's end: a unit waiting on a device that never appears would (for 90 s)."""
    state = guest.host.run("timeout 45 systemctl is-system-running --wait")
    jobs = guest.host.run("systemctl list-jobs --no-legend").stdout
    assert state.stdout.strip() == "running", f"{state.stdout.strip()}; pending jobs:\n{jobs}"
    assert guest.host.run("systemd-analyze").rc == 0


def test_sshd_never_locks_the_controller_out(guest: LabGuest) -> None:
    """The controller is every guest's only SSH client: per-source penalties would refuse it for minutes."""
    assert "persourcepenalties no" in guest.host.check_output("sshd -T").splitlines()


def test_console_prints_the_boot_log(kvm_lab: RunningLab) -> None:
    result = kvm_lab.numalab("console", "two")
    assert result.returncode == 0, result.stderr
    # A quiet boot: the kernel prints only errors, the first-boot unit says what it applied. (No getty on the
    # serial line: udev coldplug is masked, so its device unit never appears; the lab logs in over SSH.)
    assert f"numalab-firstboot: two is {kvm_lab.guests['two'].address}/" in result.stdout
    # A quiet console may hold a single line, so --lines is checked against the full log's own tail.
    full = result.stdout.splitlines()
    tail = kvm_lab.numalab("console", "two", "--lines", "1")
    assert tail.stdout.splitlines() == full[-1:]
    assert kvm_lab.numalab("console", "two", "--lines", "2").stdout.splitlines() == full[-2:]


def test_subnet_in_use_is_refused_before_anything_is_created(kvm_lab: RunningLab, tmp_path: Path) -> None:
    env = lab_env(f"{kvm_lab.lab.settings.name}-clash", tmp_path / "state", str(kvm_lab.lab.settings.subnet))
    inventory = write_inventory(tmp_path / "inventory.py", [{"name": "solo", "vcpus": 1, "memory": "512Mi"}])
    result = run_pyinfra(inventory, env, "exec", "--", "true")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "NUMALAB_SUBNET" in output and str(kvm_lab.lab.settings.subnet) in output
    assert leftovers(lab_of_inventory_with_env(inventory, env)) == []


def test_guest_without_ssh_in_time_points_at_its_console_log(kvm_lab: RunningLab, tmp_path: Path) -> None:
    env = lab_env(f"{kvm_lab.lab.settings.name}-slow", tmp_path / "state", free_subnet())
    inventory = write_inventory(
        tmp_path / "inventory.py", [{"name": "slow", "vcpus": 1, "memory": "512Mi"}], {"kvm_ssh_timeout": 1}
    )
    lab = lab_of_inventory_with_env(inventory, env)
    try:
        result = run_pyinfra(inventory, env, "exec", "--", "true")
        output = result.stdout + result.stderr
        assert result.returncode != 0
        assert "slow: SSH at" in output and "not ready after 1 s" in output
        assert f"console log {tmp_path / 'state' / 'console' / 'slow.log'}" in output
    finally:
        destroyed = run_numalab(inventory, env, "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert leftovers(lab) == []


def test_connector_alone_finds_the_guest_in_the_inventory(kvm_lab: RunningLab) -> None:
    env = dict(kvm_lab.env, NUMALAB_INVENTORY=str(kvm_lab.inventory))
    result = subprocess.run(
        [str(BIN / "pyinfra"), "-y", "@kvm/three", "exec", "--", "cat", "/sys/devices/system/node/online"],
        env=env,
        cwd=kvm_lab.inventory.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[@kvm/three] 0-2" in result.stdout + result.stderr
