"""The NumaSysfs fact: its shell dump, read by numa-align's reader, gives what the reader gives on the tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from numa_align.sysfs import SysfsDump, SysfsError, read_host, read_sysfs

from numalab.deploy.facts import NumaSysfs, TextFile
from numalab.sysfs import topology_from_host, topology_from_sysfs
from tests.fakesysfs import GIB_KIB, write_node_tree

SHAPES = {
    "two nodes, 2Mi pages": {
        "cells": {0: "0-3", 1: "4-7"}, "hugepages": {0: {2048: 128}, 1: {2048: 128}},
    },
    "three uneven nodes, distance 30, both page sizes": {
        "cells": {0: "0,3", 1: "1", 2: "2"},
        "memory_kib": {0: 2 * GIB_KIB, 1: 768 * 1024, 2: 512 * 1024},
        "distances": {0: [10, 20, 30], 1: [20, 10, 20], 2: [30, 20, 10]},
        "hugepages": {0: {2048: 0, 1048576: 1}, 1: {2048: 64, 1048576: 0}, 2: {2048: 32, 1048576: 0}},
    },
    "SMT 2 with an offline CPU, a memory-only node 250": {
        "cells": {0: "0-7", 1: "8-15", 250: ""},
        "threads_per_core": 2, "offline_cpus": "3,15",
        "memory_kib": {0: 2 * GIB_KIB, 1: 2 * GIB_KIB, 250: 8 * GIB_KIB},
    },
    "twelve nodes, sparse ids": {"cells": {node * 3: str(node) for node in range(12)}},
}


def run_command(sysfs: str | Path = "/sys") -> list[str]:
    """The fact's command as pyinfra runs it, pointed at `devices/system` of the sysfs mounted at `sysfs`."""
    command = NumaSysfs().command()
    assert command.startswith("cd /sys/devices/system ")
    command = command.replace("/sys/devices/system", str(Path(sysfs) / "devices/system"), 1)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert done.stderr == ""
    return done.stdout.splitlines()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_dump_reads_to_what_the_tree_reads_to(shape: str, tmp_path: Path) -> None:
    sysfs = write_node_tree(tmp_path, **SHAPES[shape])
    host = read_host(NumaSysfs().process(run_command(sysfs)))
    assert host == read_sysfs(sysfs)
    assert topology_from_host(host, where="fact") == topology_from_sysfs(sysfs)


def test_the_dump_carries_cores_offline_cpus_and_memory_only_nodes(tmp_path: Path) -> None:
    sysfs = write_node_tree(tmp_path, **SHAPES["SMT 2 with an offline CPU, a memory-only node 250"])
    topology = topology_from_host(read_host(NumaSysfs().process(run_command(sysfs))), where="fact")
    assert topology.ids == (0, 1, 250)
    assert topology.cell(0).offline_cpus == {3} and topology.core_of(2) == {2}
    assert topology.core_of(4) == {4, 5} and topology.threads_per_core == 2
    assert [cell.id for cell in topology.memory_only_cells] == [250]


def test_a_file_the_host_could_not_read_is_named() -> None:
    lines = ["==> node/online", "0", "==! cpu/online", "cat: cpu/online: Permission denied"]
    with pytest.raises(SysfsError, match=r"cannot read /sys/devices/system/cpu/online: .*Permission denied"):
        read_host(SysfsDump(lines))


def test_a_file_missing_from_the_dump_is_named() -> None:
    with pytest.raises(SysfsError, match=r"/sys/devices/system/node/online does not exist"):
        read_host(SysfsDump([]))
    lines = ["==> node/online", "0", "==> cpu/online", "0-1", "==> node/node0/cpulist", "0-1"]
    with pytest.raises(SysfsError, match=r"node/node0/meminfo does not exist"):
        read_host(SysfsDump(lines))


def test_on_this_machine_the_fact_and_sysfs_agree() -> None:
    host = read_host(NumaSysfs().process(run_command("/sys")))
    assert host.nodes and host == read_sysfs("/sys")
    assert topology_from_host(host, where="fact") == topology_from_sysfs("/sys")


def test_kubelet_config_file_fact_is_the_text_or_empty() -> None:
    fact = TextFile()
    assert fact.command(path="/var/lib/kubelet/config.yaml") == "cat /var/lib/kubelet/config.yaml 2>/dev/null || true"
    assert fact.process(["kind: KubeletConfiguration", "cpuManagerPolicy: static"]) == (
        "kind: KubeletConfiguration\ncpuManagerPolicy: static"
    )
    assert fact.process([]) == ""
