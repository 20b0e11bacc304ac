"""The e2e suite's probe, run in a lab guest inside a cgroup-v2 cpuset, judged by the suite's own checker.

This is how a pinned container looks from the inside, without a kubelet: a cpuset holding exactly one
NUMA node's cpus and memory (pinned), and one spanning every node (not pinned). The probe script is
the one e2e pods run, copied to the guest with scp.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from numa_align.cpulist import format_cpulist

from numalab.placement.probe import ProbeReport, parse_probe_output
from numalab.placement.verdicts import judge_pinned, judge_shared
from tests.lab.conftest import LabGuest, RunningLab

pytestmark = pytest.mark.lab

PROBE = Path(__file__).resolve().parents[2] / "e2e" / "probe.sh"
GUEST_PROBE = "/root/numalab-probe.sh"
CGROUP = "/sys/fs/cgroup/numalab-e2e-probe"


@pytest.fixture(params=["two", "three"])
def guest(request: pytest.FixtureRequest, kvm_lab: RunningLab) -> LabGuest:
    guest = kvm_lab.guests[request.param]
    copied = subprocess.run(["scp", "-q", "-F", str(guest.ssh_config), str(PROBE), f"{guest.name}:{GUEST_PROBE}"],
                            capture_output=True, text=True, timeout=60)
    assert copied.returncode == 0, copied.stderr
    return guest


def probe_in_cpuset(guest: LabGuest, cpus: frozenset[int], mems: frozenset[int], numa_node: int | None) -> ProbeReport:
    """Run the probe as the only process of a fresh cpuset cgroup; NUMA_NODE set as Allocate would."""
    env = f"NUMA_NODE={numa_node} " if numa_node is not None else ""
    script = (
        "set -e; echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control; "
        f"mkdir -p {CGROUP}; echo {format_cpulist(cpus)} > {CGROUP}/cpuset.cpus; "
        f"echo {format_cpulist(mems)} > {CGROUP}/cpuset.mems; "
        f"sh -c 'echo $$ > {CGROUP}/cgroup.procs && {env}exec sh {GUEST_PROBE}'"
    )
    try:
        result = guest.host.run("sh -c %s", script)
    finally:
        guest.host.run("rmdir %s", CGROUP)
    assert result.rc == 0, result.stderr
    return parse_probe_output(result.stdout)


def test_probe_in_a_cpuset_on_the_last_node_is_judged_pinned(guest: LabGuest) -> None:
    last = guest.topology.cells[-1]
    report = probe_in_cpuset(guest, last.cpus, frozenset({last.id}), last.id)
    assert report.node_cpus == {cell.id: cell.cpus for cell in guest.topology.cells}
    verdict = judge_pinned(report, last.id, count=len(last.cpus), memory_static=True)
    assert verdict.ok, verdict.problems
    assert (verdict.cpus, verdict.mems) == (last.cpulist, str(last.id))


def test_probe_in_a_cpuset_over_every_node_is_judged_not_pinned(guest: LabGuest) -> None:
    topology = guest.topology
    last = topology.cells[-1]
    report = probe_in_cpuset(guest, topology.cpus, frozenset(topology.ids), None)
    shared = judge_shared(report, topology.cpus)
    assert shared.ok, shared.problems
    pinned = judge_pinned(report, last.id, count=len(last.cpus), memory_static=True)
    assert not pinned.ok
    assert pinned.problems[0].startswith(f"cpus {format_cpulist(topology.cpus)} are not all on node {last.id}")
    assert pinned.problems[-1] == f"NUMA_NODE is unset, expected {last.id}"
