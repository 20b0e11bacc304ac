"""The NumaNodes fact: its shell dump, parsed, gives the Topology numa-align's sysfs reader gives."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from numa_align.sysfs import NodeInfo, node_dir, read_nodes

from numalab.deploy.facts import NumaNodes, TextFile
from numalab.sysfs import topology_from_nodes, topology_from_sysfs
from tests.fakesysfs import write_node_tree

GIB_KIB = 1024 * 1024

# (write_node_tree arguments, the lines NumaNodes().command() prints on a host of that shape)
SHAPES = {
    "two nodes, 2Mi pages": (
        {"cells": {0: "0-3", 1: "4-7"}, "memory_kib": 2 * GIB_KIB, "hugepages": {0: {2048: 128}, 1: {2048: 128}}},
        [
            "node0 cpulist 0-3",
            "node0 distance 10 20",
            f"node0 memtotal {2 * GIB_KIB}",
            "node0 hugepages 2048kB 128",
            "node1 cpulist 4-7",
            "node1 distance 20 10",
            f"node1 memtotal {2 * GIB_KIB}",
            "node1 hugepages 2048kB 128",
        ],
    ),
    "three uneven nodes, distance 30, both page sizes": (
        {
            "cells": {0: "0,3", 1: "1", 2: "2"},
            "memory_kib": {0: 2 * GIB_KIB, 1: 768 * 1024, 2: 512 * 1024},
            "distances": {0: [10, 20, 30], 1: [20, 10, 20], 2: [30, 20, 10]},
            "hugepages": {0: {2048: 0, 1048576: 1}, 1: {2048: 64, 1048576: 0}, 2: {2048: 32, 1048576: 0}},
        },
        [
            "node0 cpulist 0,3",
            "node0 distance 10 20 30",
            f"node0 memtotal {2 * GIB_KIB}",
            "node0 hugepages 1048576kB 1",
            "node0 hugepages 2048kB 0",
            "node1 cpulist 1",
            "node1 distance 20 10 20",
            "node1 memtotal 786432",
            "node1 hugepages 1048576kB 0",
            "node1 hugepages 2048kB 64",
            "node2 cpulist 2",
            "node2 distance 30 20 10",
            "node2 memtotal 524288",
            "node2 hugepages 1048576kB 0",
            "node2 hugepages 2048kB 32",
        ],
    ),
}


def run_command(sysfs: str | Path = "/sys") -> list[str]:
    """The fact's command as pyinfra runs it, pointed at the node dir of the sysfs mounted at `sysfs`."""
    command = NumaNodes().command()
    assert "cd /sys/devices/system/node " in command
    command = command.replace("/sys/devices/system/node", str(node_dir(sysfs)))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert done.stderr == ""
    return done.stdout.splitlines()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_dump_parses_to_the_topology_sysfs_gives(shape: str, tmp_path: Path) -> None:
    tree, lines = SHAPES[shape]
    sysfs = write_node_tree(tmp_path, **tree)
    nodes = NumaNodes().process(lines)
    assert nodes == read_nodes(sysfs)
    assert topology_from_nodes(nodes, where="fact") == topology_from_sysfs(sysfs)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_command_prints_those_lines(shape: str, tmp_path: Path) -> None:
    tree, lines = SHAPES[shape]
    assert run_command(write_node_tree(tmp_path, **tree)) == lines


def test_hugepage_sizes_and_distances_reach_the_topology() -> None:
    topology = topology_from_nodes(NumaNodes().process(SHAPES["three uneven nodes, distance 30, both page sizes"][1]),
                                   where="fact")
    assert topology.distance(0, 2) == 30
    assert topology.cell(0).hugepages == {"2Mi": 0, "1Gi": 1} and topology.cell(1).hugepages["2Mi"] == 64
    assert topology.cell(1).memory == 768 << 20


def test_more_than_ten_nodes_come_in_id_order(tmp_path: Path) -> None:
    sysfs = write_node_tree(tmp_path, {node: str(node) for node in range(12)})
    lines = run_command(sysfs)
    printed = list(dict.fromkeys(line.split()[0] for line in lines))
    assert printed[:4] == ["node0", "node1", "node10", "node11"]  # the shell's glob order, not the ids'
    assert [node.id for node in NumaNodes().process(lines)] == list(range(12))
    assert NumaNodes().process(lines) == read_nodes(sysfs)


def test_lines_without_a_node_and_empty_values_are_tolerated() -> None:
    lines = ["", "sh: 1: cannot open x: No such file", "node0 cpulist", "node0 memtotal 1024", "node0 distance"]
    assert NumaNodes().process(lines) == [NodeInfo(id=0, cpus=frozenset(), memory=1024 * 1024)]
    assert NumaNodes().process([]) == []


def test_on_this_machine_the_fact_and_sysfs_agree() -> None:
    nodes = NumaNodes().process(run_command("/sys"))
    assert nodes and nodes == read_nodes("/sys")
    assert topology_from_nodes(nodes, where="fact") == topology_from_sysfs("/sys")


def test_kubelet_config_file_fact_is_the_text_or_empty() -> None:
    fact = TextFile()
    assert fact.command(path="/var/lib/kubelet/config.yaml") == "cat /var/lib/kubelet/config.yaml 2>/dev/null || true"
    assert fact.process(["kind: KubeletConfiguration", "cpuManagerPolicy: static"]) == (
        "kind: KubeletConfiguration\ncpuManagerPolicy: static"
    )
    assert fact.process([]) == ""
