"""The kubelet policy on the shapes real servers have, read from fake sysfs trees through the one reader:
SMT 2 and 4, offline CPUs, memory-only nodes with GPU-like ids, nine and more nodes, several sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletSettings, kubelet_policy, parse_kubelet_args
from numalab.model.topology import Topology
from numalab.sysfs import topology_from_sysfs
from tests.fakesysfs import GIB_KIB, write_node_tree


def shape(tmp_path: Path, cells: dict[int, str], **tree) -> Topology:
    tree.setdefault("memory_kib", 8 * GIB_KIB)
    return topology_from_sysfs(write_node_tree(tmp_path, cells, **tree))


def args(topology: Topology, **settings) -> dict[str, list[str]]:
    return parse_kubelet_args(kubelet_policy(topology, KubeletSettings.from_dict(settings)).args)


def refused(topology: Topology, cgroup_version: int | None = None, **settings) -> ValidationError:
    with pytest.raises(ValidationError) as err:
        kubelet_policy(topology, KubeletSettings.from_dict(settings), cgroup_version=cgroup_version)
    return err.value


def test_smt2_reserves_the_whole_first_core(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-7", 1: "8-15"}, threads_per_core=2)
    assert args(topology)["reserved-cpus"] == ["0-1"]  # 1 CPU asked: its sibling is not left to pods


def test_smt2_with_siblings_numbered_as_intel_does(tmp_path: Path) -> None:
    cores = [f"{c},{c + 8}" for c in range(8)]
    topology = shape(tmp_path, {0: "0-3,8-11", 1: "4-7,12-15"}, cores=cores)
    assert args(topology)["reserved-cpus"] == ["0,8"]
    assert args(topology, **{"kube-reserved": {"cpu": "2", "memory": "512Mi"}})["reserved-cpus"] == ["0-1,8-9"]


def test_smt4_reserves_four_threads(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-15", 1: "16-31"}, threads_per_core=4)
    assert args(topology)["reserved-cpus"] == ["0-3"]


def test_offline_cpus_are_never_reserved(tmp_path: Path) -> None:
    # nosmt: the odd threads are offline; cpu 0 itself offline too (some kernels allow it)
    topology = shape(tmp_path, {0: "0-7", 1: "8-15"}, threads_per_core=2, offline_cpus="0-1,3,5,7,9,11,13,15")
    assert args(topology)["reserved-cpus"] == ["2"]


def test_explicit_reserved_cpus_must_be_online(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-7", 1: "8-15"}, offline_cpus="7")
    err = refused(topology, **{"reserved-cpus": "6-7"})
    assert err.field == "settings.reserved-cpus"
    assert "cpu(s) 7 are offline; the kubelet refuses reserved-cpus that are not a subset of its online" in str(err)


def test_explicit_reserved_cpus_must_be_whole_cores(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-7", 1: "8-15"}, threads_per_core=2)
    err = refused(topology, **{"reserved-cpus": "0,2"})
    assert "cpu 0 without its sibling(s) 1" in str(err) and "here 0-3" in str(err)
    assert args(topology, **{"reserved-cpus": "0-1"})["reserved-cpus"] == ["0-1"]


def test_memory_only_nodes_with_gpu_ids_are_accepted_and_get_no_reservation(tmp_path: Path) -> None:
    cells = {0: "0-7", 1: "8-15", **{node: "" for node in range(250, 256)}}
    topology = shape(tmp_path, cells)
    result = args(topology)
    assert result["reserved-cpus"] == ["0"] and result["reserved-memory"] == ["0:memory=1124Mi"]


def test_reservations_start_at_the_lowest_cell_with_cpus(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "", 1: "0-3", 2: "4-7"}, memory_kib={0: 64 * GIB_KIB, 1: 512 * 1024,
                                                                         2: 8 * GIB_KIB})
    result = args(topology)
    assert result["reserved-cpus"] == ["0"]
    # the CPU cells first, spilling to the next CPU cell; the memory-only cell is not touched
    assert result["reserved-memory"] == ["1:memory=512Mi", "2:memory=612Mi"]


def test_nine_and_more_nodes_count_memory_only_ones_too(tmp_path: Path) -> None:
    cells = {0: "0-7", 1: "8-15", **{node: "" for node in range(2, 10)}}
    topology = shape(tmp_path, cells)
    err = refused(topology)
    assert err.field == "settings.topology-manager-policy-options.max-allowable-numa-nodes"
    assert "10 NUMA nodes" in str(err)
    assert args(topology, **{"topology-manager-policy-options": {"max-allowable-numa-nodes": "10"}})


def test_hugepages_cannot_be_kube_or_system_reserved(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-3", 1: "4-7"}, hugepages={0: {2048: 512}, 1: {2048: 512}})
    err = refused(topology, **{"system-reserved": {"cpu": "500m", "memory": "512Mi", "hugepages-2Mi": "64Mi"}})
    assert err.field == "settings.system-reserved.hugepages-2Mi"
    assert "the kubelet cannot reserve 'hugepages-2Mi'" in str(err)


def test_reserved_memory_hugepages_must_add_up_to_zero(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-3", 1: "4-7"}, hugepages={0: {2048: 512}, 1: {2048: 512}})
    split = [{"numa-node": 0, "memory": "1124Mi", "hugepages-2Mi": "64Mi"}]
    err = refused(topology, **{"reserved-memory": split})
    assert "hugepages-2Mi adds up to 64Mi but Node Allocatable reserves none of it" in str(err)
    zero = [{"numa-node": 0, "memory": "1124Mi", "hugepages-2Mi": "0"}]
    assert args(topology, **{"reserved-memory": zero})["reserved-memory"] == ["0:memory=1124Mi"]


def test_align_by_socket_is_checked_against_sockets_and_policy(tmp_path: Path) -> None:
    # one NUMA node spread over two sockets (packages)
    topology = shape(tmp_path, {0: "0-7"}, packages={0: 0}, cores=[f"{c}" for c in range(8)])
    topology = Topology(topology.cells, topology.distances, topology.cores, {cpu: cpu // 4 for cpu in range(8)})
    options = {"cpu-manager-policy-options": {"align-by-socket": "true"}, "topology-manager-policy": "restricted"}
    assert "2 sockets but 1 NUMA nodes" in str(refused(topology, **options))
    two = shape(tmp_path / "two", {0: "0-3", 1: "4-7"})
    assert args(two, **options)["cpu-manager-policy-options"] == ["align-by-socket=true"]
    single = {"cpu-manager-policy-options": {"align-by-socket": "true"}}
    assert "with topology-manager-policy single-numa-node" in str(refused(two, **single))


def test_options_the_kubelet_refuses_together(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-7", 1: "8-15"}, threads_per_core=2)
    both = {"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}
    err = refused(topology, **{"cpu-manager-policy-options": both})
    assert "full-pcpus-only and distribute-cpus-across-cores cannot be used together" in str(err)


def test_full_pcpus_only_needs_every_core_whole_or_wholly_offline(tmp_path: Path) -> None:
    full = {"cpu-manager-policy-options": {"full-pcpus-only": "true"}}
    # one offline sibling: the kubelet's CPUsPerCore is 7 // 4 = 1, so its whole-core check would pass 1 CPU
    half = shape(tmp_path / "half", {0: "0-3", 1: "4-7"}, threads_per_core=2, offline_cpus="7")
    err = refused(half, **full)
    assert err.field == "settings.cpu-manager-policy-options.full-pcpus-only"
    assert "7 CPUs / 4 cores = 1 CPU(s) per core" in str(err) and "online: 6" in str(err)
    assert args(half)["reserved-cpus"] == ["0-1"]  # without the option the shape is fine
    # a whole core offline, or nosmt (every core down to one thread): the kubelet counts right
    whole = shape(tmp_path / "whole", {0: "0-3", 1: "4-7"}, threads_per_core=2, offline_cpus="6-7")
    assert args(whole, **full)["cpu-manager-policy-options"] == ["full-pcpus-only=true"]
    nosmt = shape(tmp_path / "nosmt", {0: "0-7"}, threads_per_core=2, offline_cpus="1,3,5,7")
    assert args(nosmt, **full)["cpu-manager-policy-options"] == ["full-pcpus-only=true"]


def test_cgroup_v1_is_refused_for_kubelets_that_dropped_it(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-3", 1: "4-7"})
    err = refused(topology, cgroup_version=1, **{"kubelet-version": "v1.36.3"})
    assert err.field == "host.cgroup" and "kubelet 1.36 refuses to start on it" in str(err)
    older = KubeletSettings.from_dict({"kubelet-version": "v1.34.2"})
    assert kubelet_policy(topology, older, cgroup_version=1).kubelet_version
    assert kubelet_policy(topology, KubeletSettings.from_dict({}), cgroup_version=2)


def test_a_newer_kubelet_names_the_host_data_key_and_the_flag(tmp_path: Path) -> None:
    topology = shape(tmp_path, {0: "0-3", 1: "4-7"})
    err = refused(topology, **{"kubelet-version": "v1.99.0"})
    assert "kubelet_allow_newer: true" in str(err) and "--allow-newer" in str(err)
    newer = KubeletSettings.from_dict({"kubelet-version": "v1.99.0"})
    assert kubelet_policy(topology, newer, allow_newer=True).kubelet_version
