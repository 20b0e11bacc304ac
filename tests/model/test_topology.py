import pytest

from numalab.model.errors import ValidationError
from numalab.model.topology import Topology
from numalab.sysfs import topology_from_sysfs
from tests.fakesysfs import write_node_tree


def cells(*specs):
    return {"cells": [{"id": i, "cpus": c, "memory": m} for i, c, m in specs]}


def test_from_dict_sorts_cells_and_keeps_non_contiguous_ids():
    topo = Topology.from_dict(cells((2, "4-7", "2Gi"), (0, "0-3", "1536Mi")))
    assert topo.ids == (0, 2)
    assert topo.cell(2).cpus == frozenset({4, 5, 6, 7})
    assert topo.cell(0).memory == 1536 * 2**20
    assert topo.memory == 3584 * 2**20
    assert topo.cpus == frozenset(range(8))
    assert topo.distance(0, 2) == 20 and topo.distance(2, 2) == 10
    assert topo.has_default_distances
    assert topo.cell_of_cpu(5).id == 2


def test_cpulist_syntax_round_trips():
    topo = Topology.from_dict(cells((0, "0-3,8-11", "1Gi"), (1, "4-7,12-15", "1Gi")))
    assert topo.to_dict()["cells"][0]["cpus"] == "0-3,8-11"
    assert Topology.from_dict(topo.to_dict()) == topo


def test_distances_as_rows_or_mapping():
    rows = Topology.from_dict({**cells((0, "0", "1Gi"), (2, "1", "1Gi")), "distances": [[10, 30], [30, 10]]})
    mapping = Topology.from_dict(
        {**cells((0, "0", "1Gi"), (2, "1", "1Gi")), "distances": {0: {0: 10, 2: 30}, 2: {0: 30, 2: 10}}}
    )
    assert rows == mapping
    assert rows.distance(2, 0) == 30
    assert not rows.has_default_distances


def test_hugepages_per_cell():
    topo = Topology.from_dict(
        {"cells": [{"id": 0, "cpus": "0-1", "memory": "4Gi", "hugepages": {"2Mi": 512, "1Gi": 1}}]}
    )
    assert topo.cell(0).hugepage_bytes("2Mi") == 2**30
    assert topo.cell(0).hugepage_bytes("1Gi") == 2**30


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (cells((0, "0-3", "1Gi"), (1, "3-5", "1Gi")), "numa.cells[1].cpus", "cpu 3 of cell 1 is also in cell 0"),
        (cells((0, "", "1Gi")), "numa.cells", "no cell has an online cpu"),
        (cells((0, "0", "1Gi"), (1024, "1", "1Gi")), "numa.cells[1].id", "from 0 to 1023"),
        ({"cells": [{"id": 0, "cpus": "0-1", "offline_cpus": "2", "memory": "1Gi"}]}, "numa.cells[0].offline_cpus",
         "not in cell 0's cpus"),
        ({**cells((0, "0-3", "1Gi")), "threads_per_core": 0}, "numa.threads_per_core", "1 to 8"),
        ({**cells((0, "0-2", "1Gi"), (1, "3", "1Gi")), "threads_per_core": 2}, "numa.cores", "spans cells"),
        ({**cells((0, "0-3", "1Gi")), "cores": ["0,1", "1,2"]}, "numa.cores[1]", "cpu 1 is in two cores"),
        ({**cells((0, "0-3", "1Gi")), "cores": ["0,1"]}, "numa.cores", "2-3 are in no core"),
        ({**cells((0, "0-3", "1Gi")), "cores": ["0,1"], "threads_per_core": 2}, "numa", "not both"),
        (cells((0, "0-1", "-1Gi")), "numa.cells[0].memory", "negative"),
        (cells((0, "0-1", "1Gi"), (0, "2-3", "1Gi")), "numa.cells[1].id", "used twice"),
        (cells((0, "3-1", "1Gi")), "numa.cells[0].cpus", "backwards"),
        ({"cells": []}, "numa.cells", "non-empty"),
        ({"cells": [{"id": 0, "cpus": "0"}]}, "numa.cells[0].memory", "required"),
        ({"cells": [{"id": 0, "cpus": "0", "memory": "1Gi", "cpu": 1}]}, "numa.cells[0]", "unknown key"),
        (
            {**cells((0, "0", "1Gi"), (1, "1", "1Gi")), "distances": {0: {0: 10, 1: 20}, 3: {0: 20, 1: 10}}},
            "numa.distances.3",
            "unknown node id",
        ),
        (
            {**cells((0, "0", "1Gi"), (1, "1", "1Gi")), "distances": [[10, 20], [10, 10]]},
            "numa.distances.1.0",
            "a remote distance must exceed 10",
        ),
        (
            {**cells((0, "0", "1Gi"), (1, "1", "1Gi")), "distances": [[11, 20], [20, 10]]},
            "numa.distances.0.0",
            "diagonal must be 10",
        ),
        ({**cells((0, "0", "1Gi"), (1, "1", "1Gi")), "distances": [[10, 20]]}, "numa.distances", "2 rows"),
        (
            {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi", "hugepages": {"3Mi": 1}}]},
            "numa.cells[0].hugepages.3Mi",
            "not one a kernel has",
        ),
        (
            {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi", "hugepages": {"2M": 1}}]},
            "numa.cells[0].hugepages.2M",
            "not one a kernel has",
        ),
        (
            {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi", "hugepages": {"2Mi": 1, "2048Ki": 1}}]},
            "numa.cells[0].hugepages.2048Ki",
            "2Mi is given twice",
        ),
        (
            {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi", "hugepages": {"1Gi": 2}}]},
            "numa.cells[0].hugepages",
            "exceed",
        ),
    ],
)
def test_validation_names_the_field(data, field, words):
    with pytest.raises(ValidationError) as err:
        Topology.from_dict(data)
    assert err.value.field == field
    assert words in str(err.value)


def test_from_sysfs_two_and_four_cells(tmp_path):
    two = topology_from_sysfs(write_node_tree(tmp_path / "two", {0: "0-1", 1: "2-3"}, memory_kib=2097152))
    assert two.ids == (0, 1) and two.cell(1).cpus == frozenset({2, 3}) and two.cell(0).memory == 2**31
    four = topology_from_sysfs(
        write_node_tree(
            tmp_path / "four",
            {0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"},
            distances={0: [10, 16, 32, 32], 1: [16, 10, 32, 32], 2: [32, 32, 10, 16], 3: [32, 32, 16, 10]},
            hugepages={0: {2048: 4, 1048576: 0}},
        )
    )
    assert four.ids == (0, 1, 2, 3)
    assert four.distance(0, 3) == 32 and four.distance(2, 3) == 16
    assert four.cell(0).hugepages == {"2Mi": 4, "1Gi": 0}


def test_from_sysfs_non_contiguous(tmp_path):
    topo = topology_from_sysfs(write_node_tree(tmp_path, {0: "0-1", 2: "2-3"}))
    assert topo.ids == (0, 2)


def test_from_sysfs_rejects_overlap_naming_the_tree(tmp_path):
    write_node_tree(tmp_path, {0: "0-1", 1: "1-2"})
    with pytest.raises(ValidationError, match=r"node/node1/cpulist: cpu 1 is also in node 0"):
        topology_from_sysfs(tmp_path)


def test_from_this_machines_sysfs():
    topo = topology_from_sysfs("/sys")
    assert len(topo.cells) >= 1 and topo.memory > 0 and topo.cpus


def test_memory_only_cells_offline_cpus_and_cores_round_trip():
    data = {
        "threads_per_core": 2,
        "cells": [
            {"id": 0, "cpus": "0-7", "offline_cpus": "3", "memory": "4Gi", "hugepages": {"2Mi": 64}},
            {"id": 1, "cpus": "8-15", "memory": "4Gi"},
            {"id": 250, "memory": "16Gi"},
        ],
    }
    topo = Topology.from_dict(data)
    assert topo.cell(0).cpus == frozenset({0, 1, 2, 4, 5, 6, 7}) and topo.cell(0).offline_cpus == {3}
    assert topo.offline_cpus == {3} and 3 not in topo.cpus
    assert topo.core_of(2) == {2} and topo.core_of(6) == {6, 7} and topo.threads_per_core == 2
    assert [c.id for c in topo.cpu_cells] == [0, 1] and [c.id for c in topo.memory_only_cells] == [250]
    assert topo.cell(250).memory_only and not topo.cell(0).memory_only
    assert topo.to_dict()["threads_per_core"] == 2
    assert Topology.from_dict(topo.to_dict()) == topo


def test_cores_from_sysfs_that_are_not_consecutive_round_trip_as_cores():
    topo = Topology.from_dict({**cells((0, "0-3", "1Gi")), "cores": ["0,2", "1,3"], "packages": {0: "0-3"}})
    assert topo.core_of(0) == {0, 2} and topo.packages == {0: 0, 1: 0, 2: 0, 3: 0}
    assert topo.to_dict()["cores"] == ["0,2", "1,3"]
    assert Topology.from_dict(topo.to_dict()) == topo


def test_without_smt_every_cpu_is_its_own_core():
    topo = Topology.from_dict(cells((0, "0-1", "1Gi")))
    assert topo.cores is None and topo.core_of(1) == {1} and topo.threads_per_core == 1
    assert topo.core_list == (frozenset({0}), frozenset({1}))
