"""Real-server shapes both readers must take alike, from one fake sysfs tree: numa-lab's Topology (numalab.sysfs)
and numa-align's host and NRT object (numa_align.sysfs, numa_align.nrt). Asymmetric distance tables (ACPI's SLIT
allows them), an online node with no CPUs and 0 kB (CXL memory taken offline), arm64's hugepage sizes, and
distance files with a column per possible node."""

from __future__ import annotations

from pathlib import Path

import pytest
from numa_align.discovery import advertised
from numa_align.nrt import ExclusiveUse, allocatable_from_podresources, build_nrt
from numa_align.sysfs import SysfsError, read_sysfs

from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletSettings, kubelet_policy, parse_kubelet_args
from numalab.model.topology import Topology
from numalab.sysfs import topology_from_sysfs
from tests.fakesysfs import GIB_KIB, write_node_tree

MIB = 1 << 20
GIB = 1 << 30


def nrt_zones(sysfs: Path) -> dict[str, dict]:
    """Zone name -> {"costs": {zone: value}, "resources": {name: (capacity, allocatable, available)}}, as
    numa-align publishes it for a kubelet without CPU or Memory Manager."""
    host = read_sysfs(sysfs)
    nrt = build_nrt("w", "uid", host, allocatable_from_podresources(None, host), ExclusiveUse(), "none", "pod", None)
    return {zone["name"]: {
        "costs": {cost["name"]: cost["value"] for cost in zone.get("costs", [])},
        "resources": {r["name"]: (r["capacity"], r["allocatable"], r["available"]) for r in zone["resources"]},
    } for zone in nrt["zones"]}


def assert_round_trips(topology: Topology) -> None:
    """The inventory form reads back to itself (it leaves out what sysfs adds: 1-thread cores, sizes with 0 pages)."""
    assert Topology.from_dict(topology.to_dict()).to_dict() == topology.to_dict()


def test_an_asymmetric_distance_table_is_kept_row_by_row(tmp_path: Path) -> None:
    rows = {0: [10, 16, 32], 1: [21, 10, 32], 2: [40, 40, 10]}
    sysfs = write_node_tree(tmp_path, {0: "0-1", 1: "2-3", 2: "4-5"}, distances=rows)
    topology = topology_from_sysfs(sysfs)
    assert [[topology.distance(a, b) for b in topology.ids] for a in topology.ids] == list(rows.values())
    assert_round_trips(topology)
    zones = nrt_zones(sysfs)
    assert zones["node-1"]["costs"] == {"node-0": 21, "node-1": 10, "node-2": 32}
    assert zones["node-0"]["costs"]["node-1"] == 16


def test_an_online_node_with_no_cpus_and_no_memory_is_a_cell_with_nothing(tmp_path: Path) -> None:
    memory = {0: 4 * GIB_KIB, 1: 4 * GIB_KIB, 2: 0}
    sysfs = write_node_tree(tmp_path, {0: "0-3", 1: "4-7", 2: ""}, memory_kib=memory)
    topology = topology_from_sysfs(sysfs)
    assert topology.ids == (0, 1, 2) and topology.cell(2).memory == 0 and topology.cell(2).memory_only
    assert_round_trips(topology)
    # the kubelet's Memory Manager lists it with 0 memory: reserved memory stays on the CPU cells
    result = parse_kubelet_args(kubelet_policy(topology, KubeletSettings.from_dict({})).args)
    assert result["reserved-memory"] == ["0:memory=1124Mi"]
    host = read_sysfs(sysfs)
    assert not advertised(host.nodes[2])
    assert nrt_zones(sysfs)["node-2"]["resources"] == {"memory": ("0", "0", "0")}


def test_an_empty_node_counts_towards_the_topology_managers_limit_as_the_kubelet_counts_it(tmp_path: Path) -> None:
    cells = {node: f"{2 * node}-{2 * node + 1}" for node in range(8)} | {8: ""}
    topology = topology_from_sysfs(write_node_tree(tmp_path, cells, memory_kib={**dict.fromkeys(range(8), 2 * GIB_KIB),
                                                                               8: 0}))
    with pytest.raises(ValidationError, match="this node has 9 NUMA nodes"):
        kubelet_policy(topology, KubeletSettings.from_dict({}))
    raised = {"topology-manager-policy-options": {"max-allowable-numa-nodes": "9"}}
    assert kubelet_policy(topology, KubeletSettings.from_dict(raised))


@pytest.mark.parametrize(("pages", "names"), [
    ({64: 16, 2048: 4, 32768: 1, 1048576: 0}, {"64Ki": 16, "2Mi": 4, "32Mi": 1, "1Gi": 0}),  # arm64, 4K pages
    ({2048: 8, 524288: 1, 16777216: 0}, {"2Mi": 8, "512Mi": 1, "16Gi": 0}),  # arm64, 64K pages
], ids=["arm64-4k", "arm64-64k"])
def test_every_hugepage_size_the_kernel_lists_is_kept_and_named_as_the_kubelet_does(
        tmp_path: Path, pages: dict[int, int], names: dict[str, int]) -> None:
    sysfs = write_node_tree(tmp_path, {0: "0-3", 1: "4-7"}, memory_kib=8 * GIB_KIB, hugepages={0: pages, 1: {}})
    topology = topology_from_sysfs(sysfs)
    cell = topology.cell(0)
    assert cell.hugepages == names
    page_total = sum(size * 1024 * count for size, count in pages.items())
    assert sum(cell.hugepage_bytes(name) for name in names) == page_total
    assert_round_trips(topology)
    resources = nrt_zones(sysfs)["node-0"]["resources"]
    assert {name for name in resources if name.startswith("hugepages-")} == {
        f"hugepages-{name}" for name, count in names.items() if count}
    # memory: MemTotal as capacity; what a pod can get leaves every size's pages out
    assert resources["memory"][:2] == (str(8 * GIB), str(8 * GIB - page_total))
    # numa-lab's kubelet policy takes them as memory kinds of their own
    assert kubelet_policy(topology, KubeletSettings.from_dict({}))


def test_a_distance_file_with_a_column_per_possible_node(tmp_path: Path) -> None:
    rows = {0: [10, 15, 21, 25], 2: [31, 35, 10, 45]}  # columns: nodes 0, 1, 2, 3; 1 and 3 are offline
    sysfs = write_node_tree(tmp_path, {0: "0-1", 2: "2-3"}, offline_nodes=[1, 3], distances=rows,
                            distance_columns="possible")
    assert read_sysfs(sysfs).nodes[1].distances == (31, 10)
    topology = topology_from_sysfs(sysfs)
    assert topology.distance(0, 2) == 21 and topology.distance(2, 0) == 31
    assert nrt_zones(sysfs)["node-0"]["costs"] == {"node-0": 10, "node-2": 21}


def test_a_distance_file_of_neither_length_is_refused_naming_it(tmp_path: Path) -> None:
    sysfs = write_node_tree(tmp_path, {0: "0-1", 2: "2-3"}, offline_nodes=[1, 3])
    (sysfs / "devices/system/node/node2/distance").write_text("20 10 20\n")
    words = (r"node/node2/distance: 3 distances, but there are 2 online nodes \(0,2, node/online\) and 4 possible "
             r"ones \(0-3\); expected one per online or per possible node")
    with pytest.raises(SysfsError, match=words):
        read_sysfs(sysfs)
    with pytest.raises(ValidationError, match=words):
        topology_from_sysfs(sysfs)
