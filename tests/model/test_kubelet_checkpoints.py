"""Which manager checkpoints the kubelet (v1.36 staticPolicy.validateState, CPU and Memory Manager) would refuse
on a machine. The checkpoints are written as the kubelet writes them (json.Marshal of its structs: fields in
struct order, map keys sorted), with the numbers it would compute spelled out, not computed by the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from numa_align.sysfs import read_sysfs

from numalab.model.kubelet_checkpoints import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    Machine,
    NodeMemory,
    checkpoint_mismatches,
    cpu_mismatch,
    hugepage_resource,
    memory_mismatch,
)
from tests.fakesysfs import GIB_KIB, write_node_tree

MI, GI = 2**20, 2**30
PAGES = {2 * MI: 0, GI: 0}  # what an x86 node lists with no pages set aside
LAB = Machine(frozenset(range(4)), {0: NodeMemory(2 * GI, PAGES), 1: NodeMemory(2 * GI, PAGES)})


def cpu_state(policy: str = "static", default: str = "0-3", entries: dict | None = None) -> str:
    """CPUManagerCheckpoint as the kubelet marshals it."""
    document: dict = {"policyName": policy, "defaultCpuSet": default}
    if entries:
        document["entries"] = entries
    document["checksum"] = 1775939153
    return json.dumps(document, separators=(",", ":"))


def table(total: int, system: int, allocatable: int, reserved: int = 0, free: int | None = None) -> dict:
    """One MemoryTable, fields in the struct's order."""
    return {"total": total, "systemReserved": system, "allocatable": allocatable, "reserved": reserved,
            "free": allocatable if free is None else free}


ZERO = table(0, 0, 0)


def node(memory: dict, assignments: int = 0, cells: list[int] | None = None, pages: dict | None = None) -> dict:
    return {"numberOfAssignments": assignments,
            "memoryMap": {**(pages or {"hugepages-1Gi": ZERO, "hugepages-2Mi": ZERO}), "memory": memory},
            "cells": cells}


def memory_state(machine: dict, entries: dict | None = None, policy: str = "Static") -> str:
    """MemoryManagerCheckpointV1 (what v1.36 writes with PodLevelResourceManagers off) as marshalled."""
    document: dict = {"policyName": policy, "machineState": {str(k): v for k, v in sorted(machine.items())}}
    if entries:
        document["entries"] = entries
    document["checksum"] = 2389171320
    return json.dumps(document, separators=(",", ":"))


# The lab's default worker: two cells of 2 GiB, 1124 MiB of memory reserved on cell 0 (kube + system +
# eviction), no hugepages.
FRESH = memory_state({
    0: node(table(2 * GI, 1124 * MI, 924 * MI), cells=[0]),
    1: node(table(2 * GI, 0, 2 * GI), cells=[1]),
})
RESERVED = {0: {"memory": 1124 * MI}}


# CPU Manager

def test_a_checkpoint_of_this_machine_matches() -> None:
    assert cpu_mismatch(cpu_state(), LAB) is None
    assert cpu_mismatch(cpu_state(default="0,3", entries={"pod-1": {"app": "1-2"}}), LAB) is None


def test_a_cpu_taken_offline_is_the_kubelets_refusal() -> None:
    """The lab's worker-2 with CPU 3 offline: "current set of available CPUs "0-2" doesn't match with CPUs in
    state "0-3"", seen on the real kubelet."""
    offline = Machine(frozenset({0, 1, 2}), LAB.nodes)
    found = cpu_mismatch(cpu_state(), offline)
    assert found is not None and found.path == CPU_MANAGER_STATE
    assert str(found) == (f"{CPU_MANAGER_STATE}: it holds CPUs 0-3 but the machine has 0-2 online "
                          "(no longer there: 3)")


def test_cpus_held_by_containers_count_and_a_new_cpu_is_a_mismatch_too() -> None:
    pinned = cpu_state(default="0,3", entries={"pod-1": {"app": "1-2"}})
    assert "no longer there: 3" in str(cpu_mismatch(pinned, Machine(frozenset({0, 1, 2}), LAB.nodes)))
    assert "not in it: 4" in str(cpu_mismatch(pinned, Machine(frozenset(range(5)), LAB.nodes)))


def test_the_other_rules_of_validate_state() -> None:
    overlap = cpu_state(default="0-3", entries={"pod-1": {"app": "1-2"}})
    assert "CPUs 1-2 of pod pod-1 container app are also in its default set" in str(cpu_mismatch(overlap, LAB))
    assert "default CPU set is empty" in str(cpu_mismatch(cpu_state(default="", entries={"p": {"c": "1"}}), LAB))
    assert cpu_mismatch(cpu_state(default=""), LAB) is None  # a fresh state: the kubelet fills it in


def test_reserved_cpus_must_stay_in_the_default_set() -> None:
    assert cpu_mismatch(cpu_state(), LAB, reserved_cpus=frozenset({0})) is None
    assert "reserved CPUs 0 are not in its default set 1-3" in str(
        cpu_mismatch(cpu_state(default="1-3", entries={"p": {"c": "0"}}), LAB, reserved_cpus=frozenset({0})))


def test_strict_reservation_leaves_the_reserved_cpus_out() -> None:
    strict = cpu_state(default="2-3")
    assert cpu_mismatch(strict, LAB, reserved_cpus=frozenset({0, 1}), strict=True) is None
    assert "not in it: 0-1" in str(cpu_mismatch(strict, LAB))
    assert "strictly reserved CPUs 0-1 are in its default set" in str(
        cpu_mismatch(cpu_state(), LAB, reserved_cpus=frozenset({0, 1}), strict=True))


def test_the_none_policy_checks_nothing_and_an_absent_file_is_a_fresh_start() -> None:
    assert cpu_mismatch(cpu_state(policy="none", default=""), Machine(frozenset({0}), LAB.nodes)) is None
    assert cpu_mismatch(None, LAB) is None


@pytest.mark.parametrize(("text", "why"), [
    ("", "the file is empty"),
    ("{", "not JSON"),
    ("[]", "the file is [], not a JSON object"),
    (cpu_state(default="0-"), "defaultCpuSet"),
    (cpu_state(default="0, 1"), "has spaces"),
    (cpu_state(entries={"pod-1": "1-2"}), "entries.pod-1 is"),
    ('{"policyName":"static","defaultCpuSet":3}', "defaultCpuSet is 3, not a JSON string"),
])
def test_a_checkpoint_the_kubelet_cannot_read_is_reported(text: str, why: str) -> None:
    found = cpu_mismatch(text, LAB)
    assert found is not None and "the kubelet cannot read it" in found.reason and why in found.reason


def test_keys_match_regardless_of_case_as_in_go() -> None:
    """The kubelet's own tests write "defaultCPUSet"; encoding/json takes it for defaultCpuSet."""
    text = '{"policyName":"static","defaultCPUSet":"0-2","checksum":1}'
    assert "it holds CPUs 0-2 but the machine has 0-3 online (not in it: 3)" in str(cpu_mismatch(text, LAB))
    assert cpu_mismatch(text, Machine(frozenset({0, 1, 2}), LAB.nodes)) is None


# Memory Manager

def test_a_memory_checkpoint_of_this_machine_matches() -> None:
    assert memory_mismatch(FRESH, LAB) is None
    assert memory_mismatch(FRESH, LAB, RESERVED) is None


def test_a_cell_shrunk_in_its_domain_is_the_kubelets_refusal() -> None:
    """The lab's worker-2, cell 1 from 2048 to 1792 MiB: "the expected machine state is different"."""
    shrunk = Machine(LAB.cpus, {0: LAB.nodes[0], 1: NodeMemory(1792 * MI, PAGES)})
    found = memory_mismatch(FRESH, shrunk)
    assert found is not None and found.path == MEMORY_MANAGER_STATE
    assert found.reason == "NUMA node 1 memory: total 2Gi in it, 1792Mi on the machine"


def test_hugepages_set_aside_change_both_tables() -> None:
    paged = Machine(LAB.cpus, {0: NodeMemory(2 * GI, {2 * MI: 64, GI: 0}), 1: LAB.nodes[1]})
    assert memory_mismatch(FRESH, paged).reason == (
        "NUMA node 0 hugepages-2Mi: total 0 in it, 128Mi on the machine; "
        "NUMA node 0 memory: allocatable 924Mi in it, 796Mi on the machine")
    written = memory_state({
        0: node(table(2 * GI, 1124 * MI, 796 * MI), cells=[0],
                pages={"hugepages-1Gi": ZERO, "hugepages-2Mi": table(128 * MI, 0, 128 * MI)}),
        1: node(table(2 * GI, 0, 2 * GI), cells=[1]),
    })
    assert memory_mismatch(written, paged) is None


def test_a_page_size_or_node_only_one_side_has() -> None:
    arm = Machine(LAB.cpus, {0: NodeMemory(2 * GI, {**PAGES, 64 * 1024: 0}), 1: LAB.nodes[1]})
    assert memory_mismatch(FRESH, arm).reason == "NUMA node 0 hugepages-64Ki: on the machine only"
    one = Machine(LAB.cpus, {0: LAB.nodes[0]})
    assert memory_mismatch(FRESH, one).reason == "NUMA node 1 is in it but not on the machine"
    three = Machine(LAB.cpus, {**LAB.nodes, 2: NodeMemory(8 * GI, {})})
    assert memory_mismatch(FRESH, three).reason == "NUMA node 2 is on the machine but not in it"


def test_containers_memory_is_laid_over_the_machine() -> None:
    pod = {"pod-1": {"app": [{"numaAffinity": [1], "type": "memory", "size": 512 * MI}]}}
    held = {0: node(table(2 * GI, 1124 * MI, 924 * MI), cells=[0]),
            1: node(table(2 * GI, 0, 2 * GI, 512 * MI, 1536 * MI), assignments=1, cells=[1])}
    assert memory_mismatch(memory_state(held, pod), LAB) is None
    assert memory_mismatch(memory_state(held), LAB).reason == (  # the same state without the pod's entry
        "NUMA node 1: 1 assignments in it, 0 from its containers; "
        "NUMA node 1 memory: free 1536Mi over its group [1] in it, 2Gi on the machine")


def test_a_block_across_two_nodes_is_compared_over_its_group() -> None:
    """1.5Gi on [0, 1]: node 0's 924Mi free first, the rest from node 1; free and reserved are summed over the
    group (areMachineStatesEqual), so another split of the same sums matches too."""
    wide = {"pod-w": {"app": [{"numaAffinity": [0, 1], "type": "memory", "size": 1536 * MI}]}}
    split = {0: node(table(2 * GI, 1124 * MI, 924 * MI, 924 * MI, 0), assignments=1, cells=[0, 1]),
             1: node(table(2 * GI, 0, 2 * GI, 612 * MI, 1436 * MI), assignments=1, cells=[0, 1])}
    assert memory_mismatch(memory_state(split, wide), LAB) is None
    other = {0: node(table(2 * GI, 1124 * MI, 924 * MI, 900 * MI, 24 * MI), assignments=1, cells=[0, 1]),
             1: node(table(2 * GI, 0, 2 * GI, 636 * MI, 1412 * MI), assignments=1, cells=[0, 1])}
    assert memory_mismatch(memory_state(other, wide), LAB) is None
    short = {0: split[0], 1: node(table(2 * GI, 0, 2 * GI, 600 * MI, 1448 * MI), assignments=1, cells=[0, 1])}
    assert memory_mismatch(memory_state(short, wide), LAB).reason == (
        "NUMA node 0 memory: free 1448Mi over its group [0, 1] in it, 1436Mi on the machine; "
        "NUMA node 1 memory: free 1448Mi over its group [0, 1] in it, 1436Mi on the machine")


def test_a_block_on_a_node_the_machine_lost() -> None:
    pod = {"pod-1": {"app": [{"numaAffinity": [1], "type": "memory", "size": 512 * MI}]}}
    held = {0: node(table(2 * GI, 1124 * MI, 924 * MI), cells=[0]),
            1: node(table(2 * GI, 0, 2 * GI, 512 * MI, 1536 * MI), assignments=1, cells=[1])}
    one = Machine(LAB.cpus, {0: LAB.nodes[0]})
    assert memory_mismatch(memory_state(held, pod), one).reason == (
        "pod pod-1 container app: its memory is on NUMA node 1, which the machine does not have")


def test_the_configured_reservation_is_compared_when_given() -> None:
    """The deploy gives the new config's reservedMemory; the guard compares the machine only (None)."""
    assert memory_mismatch(FRESH, LAB, {0: {"memory": 612 * MI}, 1: {"memory": 512 * MI}}).reason == (
        "NUMA node 0 memory: systemReserved 1124Mi in it, 612Mi expected (this machine, the new reservedMemory); "
        "NUMA node 1 memory: systemReserved 0 in it, 512Mi expected (this machine, the new reservedMemory)")


def test_a_reservation_above_the_total_wraps_as_in_uint64() -> None:
    """getDefaultMachineState subtracts in uint64: 2Mi reserved of no 2Mi pages is 2^64 - 2Mi allocatable."""
    wrapped = 2**64 - 2 * MI
    written = memory_state({
        0: node(table(2 * GI, 1124 * MI, 924 * MI), cells=[0],
                pages={"hugepages-1Gi": ZERO, "hugepages-2Mi": table(0, 2 * MI, wrapped)}),
        1: node(table(2 * GI, 0, 2 * GI), cells=[1]),
    })
    reserved = {0: {"memory": 1124 * MI, "hugepages-2Mi": 2 * MI}}
    assert memory_mismatch(written, LAB, reserved) is None
    assert memory_mismatch(written, LAB) is None


def test_an_empty_machine_state_is_fresh_unless_containers_hold_memory() -> None:
    assert memory_mismatch(memory_state({}), LAB) is None
    pod = {"p": {"c": [{"numaAffinity": [0], "type": "memory", "size": 1}]}}
    assert "machine state is empty" in memory_mismatch(memory_state({}, pod), LAB).reason


def test_the_none_policy_checks_nothing() -> None:
    assert memory_mismatch(memory_state({}, policy="None"), Machine(LAB.cpus, {})) is None
    assert memory_mismatch(memory_state({0: node(table(1, 0, 1), cells=[0])}, policy="None"), LAB) is None


@pytest.mark.parametrize(("text", "why"), [
    ("", "the file is empty"),
    ('{"policyName":"Static","machineState":{"zero":{}}}', "'zero' is not a NUMA node id"),
    (FRESH.replace('"total":2147483648', '"total":-1', 1), "not an unsigned 64-bit number"),
    (FRESH.replace('"total":2147483648', '"total":2.5', 1), "not a JSON integer"),
    ('{"policyName":"Static","machineState":{},"entries":{"p":{"c":{}}}}', "entries.p.c is {}, not a JSON array"),
])
def test_a_memory_checkpoint_the_kubelet_cannot_read_is_reported(text: str, why: str) -> None:
    found = memory_mismatch(text, LAB)
    assert found is not None and "the kubelet cannot read it" in found.reason and why in found.reason


# Both files, and the machine from sysfs

def test_both_files_are_checked_each_with_its_reason() -> None:
    offline = Machine(frozenset({0, 1, 2}), {0: LAB.nodes[0], 1: NodeMemory(1792 * MI, PAGES)})
    found = checkpoint_mismatches(cpu_state(), FRESH, offline, reserved_memory=RESERVED)
    assert [m.path for m in found] == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert checkpoint_mismatches(cpu_state(), FRESH, LAB, reserved_cpus={0}, reserved_memory=RESERVED) == []
    assert checkpoint_mismatches(None, None, offline) == []


def test_the_machine_from_sysfs_is_what_cadvisor_reports(tmp_path: Path) -> None:
    """Online CPUs only, MemTotal per node, every page size a node lists (0 pages included) in bytes."""
    sysfs = write_node_tree(tmp_path, {0: "0-3", 1: "4-7", 2: ""}, offline_cpus="7",
                            memory_kib={0: 2 * GIB_KIB, 1: 1792 * 1024, 2: 4 * GIB_KIB},
                            hugepages={0: {2048: 64, 1048576: 0}, 1: {2048: 0, 1048576: 1}, 2: {64: 3}})
    assert Machine.from_sysfs(read_sysfs(sysfs)) == Machine(frozenset(range(7)), {
        0: NodeMemory(2 * GI, {2 * MI: 64, GI: 0}), 1: NodeMemory(1792 * MI, {2 * MI: 0, GI: 1}),
        2: NodeMemory(4 * GI, {64 * 1024: 3}),
    })


@pytest.mark.parametrize(("size", "name"), [(2 * MI, "hugepages-2Mi"), (GI, "hugepages-1Gi"),
                                            (64 * 1024, "hugepages-64Ki"), (32 * MI, "hugepages-32Mi"),
                                            (512 * MI, "hugepages-512Mi"), (16 * GI, "hugepages-16Gi")])
def test_hugepage_resource_names_are_the_kubelets(size: int, name: str) -> None:
    assert hugepage_resource(size) == name
