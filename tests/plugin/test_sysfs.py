"""numa-align's sysfs reader on the shapes real servers have: SMT 2 and 4, offline CPUs, memory-only nodes
(CXL, HBM, GPU memory with ids up to 255), sparse ids, nine and more nodes, offline nodes; and bad trees."""

from __future__ import annotations

from pathlib import Path

import pytest
from numa_align.sysfs import SysfsError, read_sysfs

from tests.fakesysfs import GIB_KIB, write_node_tree


def test_smt2_cores_as_intel_numbers_them(tmp_path: Path) -> None:
    # two sockets x 4 cores x 2 threads; siblings are cpu and cpu+8 (0,8 1,9 ...)
    cores = [f"{c},{c + 8}" for c in range(8)]
    host = read_sysfs(write_node_tree(tmp_path, {0: "0-3,8-11", 1: "4-7,12-15"}, cores=cores))
    assert host.threads_per_core == 2
    assert host.cpus[0].core == {0, 8} and host.cpus[12].core == {4, 12}
    assert host.cpus[5].node == 1 and host.cpus[5].package == 1


def test_smt4_consecutive_threads(tmp_path: Path) -> None:
    host = read_sysfs(write_node_tree(tmp_path, {0: "0-15", 1: "16-31"}, threads_per_core=4))
    assert host.threads_per_core == 4 and host.cpus[17].core == {16, 17, 18, 19}


@pytest.mark.parametrize("in_cpulist", [False, True], ids=["x86: cpulist drops them", "cpulist keeps them"])
def test_offline_cpus_are_known_but_not_in_cpus_or_cores(tmp_path: Path, in_cpulist: bool) -> None:
    # nosmt: every second thread offline; the node keeps its cpuN entry (and, off x86, its cpulist place)
    host = read_sysfs(write_node_tree(tmp_path, {0: "0-7", 1: "8-15"}, threads_per_core=2,
                                      offline_cpus="1,3,5,7,9,11,13,15", offline_in_cpulist=in_cpulist))
    assert (tmp_path / "devices/system/node/node0/cpulist").read_text() == ("0-7\n" if in_cpulist else "0,2,4,6\n")
    node0 = host.nodes[0]
    assert node0.cpus == {0, 2, 4, 6} and node0.offline_cpus == {1, 3, 5, 7}
    assert host.cpus[0].core == {0} and 1 not in host.cpus and host.threads_per_core == 1
    assert host.offline_cpus == frozenset(range(1, 16, 2))


def test_memory_only_nodes_with_gpu_like_ids(tmp_path: Path) -> None:
    cells = {0: "0-3", 1: "4-7", **{node: "" for node in range(250, 256)}}
    memory = {0: 4 * GIB_KIB, 1: 4 * GIB_KIB, **{node: 16 * GIB_KIB for node in range(250, 256)}}
    host = read_sysfs(write_node_tree(tmp_path, cells, memory_kib=memory))
    assert [n.id for n in host.cpu_nodes] == [0, 1]
    assert [n.id for n in host.memory_only_nodes] == list(range(250, 256))
    assert host.nodes[2].memory == 16 * GIB_KIB * 1024 and host.nodes[2].as_dict()["memory_only"] is True


def test_nine_and_more_sparse_nodes_come_in_id_order(tmp_path: Path) -> None:
    cells = {node * 7: f"{2 * node}-{2 * node + 1}" for node in range(12)}
    host = read_sysfs(write_node_tree(tmp_path, cells))
    assert [n.id for n in host.nodes] == [node * 7 for node in range(12)]
    assert host.nodes[11].distances == tuple([20] * 11 + [10])


def test_a_node_possible_but_offline_is_reported_not_read(tmp_path: Path) -> None:
    host = read_sysfs(write_node_tree(tmp_path, {0: "0-1", 2: "2-3"}, offline_nodes=[1, 3]))
    assert [n.id for n in host.nodes] == [0, 2] and host.offline_nodes == {1, 3}


def test_a_node_whose_cpus_are_all_offline_counts_as_memory_only(tmp_path: Path) -> None:
    host = read_sysfs(write_node_tree(tmp_path, {0: "0-1", 1: "2-3"}, offline_cpus="2-3"))
    assert [n.id for n in host.memory_only_nodes] == [1] and host.nodes[1].offline_cpus == {2, 3}


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda s: (s / "devices/system/cpu/online").unlink(), "devices/system/cpu/online does not exist"),
        (lambda s: (s / "devices/system/cpu/online").write_text("0-x\n"), "cpu/online: '0-x' is not a cpulist"),
        (lambda s: (s / "devices/system/cpu/cpu1/topology/thread_siblings_list").unlink(),
         "cpu/cpu1/topology/thread_siblings_list does not exist"),
        (lambda s: (s / "devices/system/cpu/cpu1/topology/thread_siblings_list").write_text("0\n"),
         "thread_siblings_list does not list cpu 1 itself"),
        (lambda s: (s / "devices/system/cpu/cpu0/topology/physical_package_id").write_text("zero\n"),
         "physical_package_id: expected a whole number"),
        (lambda s: (s / "devices/system/node/node1/distance").write_text("20\n"),
         "node/node1/distance: 1 distances, but there are 2 online nodes"),
        (lambda s: (s / "devices/system/node/node0/meminfo").write_text("nothing\n"),
         "node/node0/meminfo has no 'Node 0 MemTotal:' line"),
        (lambda s: (s / "devices/system/cpu/online").write_text("0-4\n"),
         "cpu(s) 4 are online but in no online node's cpulist"),
        (lambda s: (s / "devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages").write_text("x\n"),
         "hugepages-2048kB/nr_hugepages: expected a whole number"),
    ],
)
def test_a_bad_tree_is_refused_naming_the_file(tmp_path: Path, damage, words: str) -> None:
    sysfs = write_node_tree(tmp_path, {0: "0-1", 1: "2-3"})
    damage(sysfs)
    with pytest.raises(SysfsError) as err:
        read_sysfs(sysfs)
    assert words in str(err.value) and str(tmp_path) in str(err.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    sysfs = write_node_tree(tmp_path, {0: "0-1"})
    target = sysfs / "devices/system/node/node0/cpulist"
    target.unlink()
    target.mkdir()
    with pytest.raises(SysfsError, match=r"cannot read .*node0/cpulist: Is a directory"):
        read_sysfs(sysfs)
