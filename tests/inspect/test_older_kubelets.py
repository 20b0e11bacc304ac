"""`numa-align inspect` against kubelets without a Memory Manager or without GetAllocatableResources.

Kubelet 1.20 has neither (no memory_manager_state; GetAllocatableResources UNIMPLEMENTED); 1.21-1.22 may
answer GetAllocatableResources "disabled" (its feature gate is off); many clusters run the Memory Manager
with policy None (PodResources then reports no memory). CPUs and numa-align devices are still placed.
"""

from __future__ import annotations

import json

import grpc
import pytest
from numa_align.inspect import format_table, main

from tests.inspect.conftest import MIB64, PINNED_UID
from tests.kubeletdouble.podresources import ContainerAlloc, Devices, PodAlloc

NOT_MANAGED = "not managed by this kubelet"
PINNED = PodAlloc("e2e", "pinned-1", [ContainerAlloc(
    "app", cpus=[2], devices=[Devices("numa-align/numa-1", ["numa-1-0"], [1])])])
BURSTABLE = PodAlloc("e2e", "burstable", [ContainerAlloc("app")])


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def as_kubelet_1_20(node) -> None:
    """No memory_manager_state, no memory in List, GetAllocatableResources UNIMPLEMENTED (as grpc-go says)."""
    node.write_state({PINNED_UID: {"app": "2"}}, {}, memory_policy=None)
    node.double.set_pods([BURSTABLE, PINNED])
    node.double.fail("GetAllocatableResources", grpc.StatusCode.UNIMPLEMENTED,
                     "unknown method GetAllocatableResources for service v1.PodResourcesLister")


def test_kubelet_1_20_json_places_cpus_and_devices_and_says_memory_is_not_managed(node, capsys):
    as_kubelet_1_20(node)
    code, out, err = run(capsys, *node.args, "--format", "json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    memory_state = node.root / "kubelet" / "memory_manager_state"
    assert report["memory_manager"] == {
        "policy": None,
        "managed": False,
        "note": f"memory affinity {NOT_MANAGED}: no {memory_state} "
                "(no Memory Manager before kubelet 1.21, nor in 1.21 without its feature gate)",
    }
    assert report["allocatable"] == {
        "cpus": {}, "devices": {}, "memory": [], "served": False,
        "note": "not served by this kubelet: GetAllocatableResources is UNIMPLEMENTED (kubelets before 1.21 lack it)",
    }
    pinned = report["pods"][1]["containers"][0]
    assert pinned == {
        "name": "app",
        "exclusive_cpus": "2",
        "cpu_numa": [1],
        "memory": [],
        "memory_numa": [],
        "memory_affinity": NOT_MANAGED,
        "numa_align": [{"resource": "numa-align/numa-1", "ids": ["numa-1-0"], "numa": [1]}],
        "devices": [],
        "state": {"cpus": "2", "memory_numa": []},
    }
    assert report["pods"][0]["containers"][0]["memory_affinity"] == NOT_MANAGED
    assert node.double.calls == {"List": 1, "GetAllocatableResources": 1, "Get": 0}


def test_kubelet_1_20_table_says_memory_is_not_managed(node, capsys):
    as_kubelet_1_20(node)
    code, out, err = run(capsys, *node.args)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"cpu manager static, shared pool 0,3; memory affinity {NOT_MANAGED}: no ")
    assert lines[1:4] == [
        "numa 0: cpus 0-1",
        "numa 1: cpus 2-3",
        "allocatable not served by this kubelet: GetAllocatableResources is UNIMPLEMENTED (kubelets before 1.21 "
        "lack it)",
    ]
    rows = [line.split() for line in lines[5:]]
    assert rows[0] == ["POD", "CONTAINER", "CPUS", "CPU-NUMA", "MEM-NUMA", "NUMA-ALIGN", "STATE"]
    assert rows[1] == ["e2e/burstable", "app", "-", "-", "unmanaged", "-", "ok"]
    assert rows[2] == ["e2e/pinned-1", "app", "2", "1", "unmanaged", "numa-1x1", "ok"]


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_memory_manager_policy_none_is_not_managed(node, capsys, fmt):
    node.write_state({PINNED_UID: {"app": "2"}}, {}, memory_policy="None")
    node.double.set_pods([BURSTABLE, PINNED])
    node.double.set_allocatable(cpus=[1, 2, 3], devices=[Devices("numa-align/numa-1", ["numa-1-0"], [1])])
    code, out, err = run(capsys, *node.args, "--format", fmt)
    assert (code, err) == (0, "")
    why = f"Memory Manager policy None in {node.root / 'kubelet' / 'memory_manager_state'}"
    if fmt == "table":
        lines = out.splitlines()
        assert lines[0] == f"cpu manager static, shared pool 0,3; memory affinity {NOT_MANAGED}: {why}"
        assert lines[2] == "numa 1: cpus 2-3, allocatable cpus 2-3, devices numa-align/numa-1 x1"
        assert lines[-1].split() == ["e2e/pinned-1", "app", "2", "1", "unmanaged", "numa-1x1", "ok"]
        return
    report = json.loads(out)
    assert report["memory_manager"] == {"policy": "None", "managed": False,
                                        "note": f"memory affinity {NOT_MANAGED}: {why}"}
    assert report["allocatable"]["served"] and report["allocatable"]["cpus"] == {"0": "1", "1": "2-3"}
    pinned = report["pods"][1]["containers"][0]
    assert (pinned["cpu_numa"], pinned["memory_numa"], pinned["memory_affinity"]) == ([1], [], NOT_MANAGED)
    assert [d["resource"] for d in pinned["numa_align"]] == ["numa-align/numa-1"]


def test_allocatable_disabled_by_feature_gate_keeps_a_static_memory_manager(node, capsys):
    node.double.fail("GetAllocatableResources", grpc.StatusCode.UNKNOWN,
                     "Pod Resources API GetAllocatableResources disabled")
    code, out, err = run(capsys, *node.args, "--format", "json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["allocatable"]["served"] is False
    assert "KubeletPodResourcesGetAllocatable feature gate" in report["allocatable"]["note"]
    assert report["memory_manager"] == {"policy": "Static", "managed": True, "note": None}
    pinned = report["pods"][1]["containers"][0]
    assert pinned["memory"] == [{"type": "memory", "size": MIB64, "numa": [1]}]
    assert (pinned["memory_numa"], pinned["memory_affinity"]) == ([1], "managed")


@pytest.mark.parametrize(
    ("method", "code"),
    [("GetAllocatableResources", grpc.StatusCode.PERMISSION_DENIED), ("List", grpc.StatusCode.UNIMPLEMENTED)],
)
def test_other_api_failures_still_exit_1_with_the_status(node, capsys, method, code):
    node.double.fail(method, code, "no")
    status, out, err = run(capsys, *node.args)
    assert (status, out) == (1, "")
    assert err == f"numa-align inspect: PodResources API at {node.socket}: {code.name}: no\n"


def test_a_missing_socket_is_still_an_error_on_an_old_kubelet(node, capsys):
    as_kubelet_1_20(node)
    absent = node.root / "pod-resources" / "kubelet.sock"
    code, out, err = run(capsys, *node.args, "--socket", str(absent))
    assert (code, out) == (1, "")
    assert err == f"numa-align inspect: no socket at {absent}: is the kubelet running on this node?\n"


def test_a_report_from_an_older_numa_align_still_formats(node, capsys):
    """`numalab inspect` may read a node whose numa-align predates the managed/served fields."""
    code, out, _ = run(capsys, *node.args, "--format", "json")
    report = json.loads(out)
    table = format_table(report)
    for key in ("managed", "note"):
        del report["memory_manager"][key]
    for key in ("served", "note"):
        del report["allocatable"][key]
    for pod in report["pods"]:
        for container in pod["containers"]:
            del container["memory_affinity"]
    assert code == 0 and format_table(report) == table
    assert table.splitlines()[0].endswith("; memory manager Static")
