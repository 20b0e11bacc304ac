"""Case 5's pure part: numa-align's registrations counter read from its /metrics text."""

from __future__ import annotations

import sys

import pytest

from numalab.inspect import RemoteInspectError
from tests.e2e_logic.conftest import load_e2e_module

for _name in ("kube", "probe_pods", "results"):  # case 5 imports them as the suite does
    sys.modules.setdefault(_name, load_e2e_module(_name))
restart_case = load_e2e_module("test_5_kubelet_restart")


def test_registrations_are_read_from_numa_aligns_metrics_text() -> None:
    text = ("# HELP numa_align_registrations_total Successful Register calls to the kubelet\n"
            "# TYPE numa_align_registrations_total counter\nnuma_align_registrations_total 4.0\n"
            "numa_align_registrations_created 1.7e9\n")
    assert restart_case.registrations(text) == 4
    assert restart_case.registrations('numa_align_devices{resource="x"} 1.0\n') is None


def test_the_devices_the_kubelet_holds_are_read_from_numa_align_inspect() -> None:
    report = {"pods": [], "allocatable": {"served": True, "devices": {
        "numa-align/numa-0": {"count": 100, "numa": [0]},
        "numa-align/numa-1": {"count": 99, "numa": [1]},
        "example.com/gpu": {"count": 2, "numa": [0]},
    }}}
    assert restart_case.kubelet_devices(report) == {0: 100, 1: 99}
    # the kubelet holds nothing yet (restored from its checkpoint, no ListAndWatch answer), or cannot say
    assert restart_case.kubelet_devices({"pods": [], "allocatable": {"devices": {}}}) == {}
    assert restart_case.kubelet_devices({"pods": [], "allocatable": {"served": False, "devices": {}}}) == {}


class _Node:
    """A testinfra host's run() and backend name, answering one command."""

    def __init__(self, rc: int, stdout: str) -> None:
        self.rc, self.stdout, self.commands = rc, stdout, []
        self.backend = self

    def get_hostname(self) -> str:
        return "worker-1"

    def run(self, command: str) -> _Node:
        self.commands.append(command)
        return self


def test_the_kubelet_devices_are_read_on_the_node_and_a_report_that_is_not_one_fails_naming_it() -> None:
    report = '{"pods": [], "allocatable": {"devices": {"numa-align/numa-0": {"count": 100}}}}'
    node = _Node(0, report)
    assert restart_case.read_kubelet_devices(node, "numa-align inspect") == {0: 100}
    assert node.commands == ["numa-align inspect --format json"]
    assert restart_case.read_kubelet_devices(_Node(1, ""), "numa-align inspect") == {}  # socket not back yet
    with pytest.raises(RemoteInspectError, match=r"worker-1: `numa-align inspect --format json` printed no JSON"):
        restart_case.read_kubelet_devices(_Node(0, "Traceback ..."), "numa-align inspect")
    with pytest.raises(RemoteInspectError, match="without 'pods'"):
        restart_case.read_kubelet_devices(_Node(0, "{}"), "numa-align inspect")
