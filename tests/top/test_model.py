"""`numalab top`'s model: NRT zones + allocations + Nodes + Pods -> per-cell figures and holders."""

import json

from numa_align.nrt_api import ALLOCATIONS_ANNOTATION

from numalab.top.model import NO_NRT, Square, build_views
from numalab.top.nrt import Amount, parse_nrt
from tests.top.fakes import GI, MI, node, nrt, pod, two_cell_worker, zone


def view_of(nrt_obj, nodes=None, pods=()):
    name = nrt_obj["metadata"]["name"]
    views = build_views([nrt_obj], [node(name)] if nodes is None else nodes, list(pods))
    return {v.name: v for v in views}[name]


def cells_by_zone(view):
    return {cell.zone: cell for cell in view.cells}


def test_two_cell_node_with_pinned_pods():
    pods = [pod("default/pinned-a", "worker-1"), pod("default/pinned-b", "worker-1"),
            pod("ml/trainer-7f9c", "worker-1")]
    view = view_of(two_cell_worker(), pods=pods)
    assert (view.policy, view.scope, view.allocations_published, view.warnings) == \
        ("single-numa-node", "pod", True, ())
    cell0, cell1 = view.cells
    assert (cell0.zone, cell0.numa_id, cell1.zone, cell1.numa_id) == ("node-0", 0, "node-1", 1)
    assert cell0.cpu == Amount(4, 3, 0) and (cell0.cpu.reserved, cell0.cpu.used) == (1, 3)
    assert cell0.memory.used == 3 * GI and cell0.memory.reserved == 1124 * MI
    assert cell0.hugepages == {"2Mi": Amount(512 * MI, 512 * MI, 512 * MI)}
    assert cell0.devices["numa-align/numa-0"].used == 2
    assert [(h.pod, h.cpus, h.memory, dict(h.devices)) for h in cell0.holds] == [
        ("default/pinned-a", (1, 2), 2 * GI, {"numa-align/numa-0": 1}),
        ("default/pinned-b", (3,), GI, {"numa-align/numa-0": 1}),
    ]
    assert cell0.squares() == [Square("reserved"), Square("held", "default/pinned-a", 1),
                               Square("held", "default/pinned-a", 2), Square("held", "default/pinned-b", 3)]
    assert [(s.state, s.cpu) for s in cell1.squares()] == [("held", 6), ("held", 7), ("free", None), ("free", None)]
    assert cell1.cpu.used == 2 and [h.pod for h in cell1.holds] == ["ml/trainer-7f9c"]
    assert [(state, pod_name, size) for state, pod_name, size in cell0.memory_segments()] == [
        ("reserved", None, 1124 * MI), ("held", "default/pinned-a", 2 * GI), ("held", "default/pinned-b", GI),
        ("free", None, 8 * GI - 1124 * MI - 3 * GI)]
    assert [(p.allocation.pod, p.exists, p.phase, p.qos) for p in view.pods] == [
        ("default/pinned-a", True, "Running", "Guaranteed"), ("default/pinned-b", True, "Running", "Guaranteed"),
        ("ml/trainer-7f9c", True, "Running", "Guaranteed")]


def test_memory_only_cell_has_memory_and_no_cpu_squares():
    obj = nrt("cxl-1", [zone(0, cpu=(4, 4, 4), memory=(8 * GI, 8 * GI, 8 * GI)),
                        zone(1, memory=(64 * GI, 64 * GI, 60 * GI)),
                        zone(2, cpu=(0, 0, 0), memory=(16 * GI, 16 * GI, 16 * GI))],
              allocations={"db/big": {"cpus": "2", "numa_nodes": [0], "memory": {"0": GI, "1": 4 * GI}}})
    cells = cells_by_zone(view_of(obj, pods=[pod("db/big", "cxl-1")]))
    assert not cells["node-0"].memory_only
    assert cells["node-1"].memory_only and cells["node-2"].memory_only
    assert cells["node-1"].cpu is None and cells["node-1"].squares() == []
    assert cells["node-2"].squares() == []
    assert cells["node-1"].memory.used == 4 * GI
    assert [(h.pod, h.cpus, h.memory) for h in cells["node-1"].holds] == [("db/big", (), 4 * GI)]
    assert [(h.pod, h.cpus, h.memory) for h in cells["node-0"].holds] == [("db/big", (2,), GI)]


def test_sparse_numa_ids_without_smt():
    obj = nrt("sparse", [zone(0, cpu=(2, 1, 1), memory=(4 * GI, 3 * GI, 3 * GI)),
                         zone(2, cpu=(3, 3, 1), memory=(4 * GI, 4 * GI, 3 * GI),
                              devices={"numa-align/numa-2": (3, 3, 1)})],
              allocations={"a/p": {"cpus": "3-4", "numa_nodes": [2], "memory": {"2": GI},
                                   "devices": {"numa-align/numa-2": 2}}})
    view = view_of(obj, pods=[pod("a/p", "sparse")])
    assert [(c.zone, c.numa_id) for c in view.cells] == [("node-0", 0), ("node-2", 2)]
    cell0, cell2 = view.cells
    assert cell0.holds == () and [s.state for s in cell0.squares()] == ["reserved", "free"]
    assert [(s.state, s.cpu) for s in cell2.squares()] == [("held", 3), ("held", 4), ("free", None)]
    assert cell2.holds[0].devices == {"numa-align/numa-2": 2}
    assert view.warnings == ()


def test_stale_nrt_object_warns_and_still_shows_its_cells():
    obj = nrt("worker-9", [zone(0, cpu=(2, 2, 1), memory=(GI, GI, GI))],
              allocations={"default/old": {"cpus": "1", "numa_nodes": [0]}})
    [view] = build_views([obj], [], [])
    assert not view.node_exists and view.has_nrt and len(view.cells) == 1
    assert view.warnings[0] == "stale NodeResourceTopology worker-9: node worker-9 no longer exists"
    assert "allocation of default/old: no such pod on worker-9 (stale entry: the pod is gone)" in view.warnings
    assert view.pods[0].exists is False and view.pods[0].phase is None


def test_node_without_nrt_is_a_warning_not_an_error():
    views = build_views([], [node("worker-1"), {"metadata": {"name": "server"}}], [])
    assert [(v.name, v.has_nrt, v.node_exists, v.cells) for v in views] == [
        ("server", False, True, ()), ("worker-1", False, True, ())]
    assert views[1].warnings == (NO_NRT,)
    assert NO_NRT == "no NodeResourceTopology: numa-align is not publishing here (numa_align_nrt off?)"
    assert views[0].warnings[0].startswith(NO_NRT) and "advertises no numa-align/numa-N" in views[0].warnings[0]


def test_only_names_the_plugin_registers_are_numa_align():
    """numa-align/numa-x or a zero-padded numa-01 is not numa-align's: the node advertises none, and such a device
    of a pod is drawn where another device would be (the pod's first cell), not in the cell its digits name."""
    allocatable = {"numa-align/numa-x": "1", "numa-align/numa-01": "1"}
    odd = {"metadata": {"name": "odd"}, "status": {"allocatable": allocatable}}
    [view] = build_views([], [odd], [])
    assert "advertises no numa-align/numa-N" in view.warnings[0]
    obj = nrt("w", [zone(0, cpu=(2, 2, 1), memory=(GI, GI, GI)), zone(1, cpu=(2, 2, 2), memory=(GI, GI, GI))],
              allocations={"a/p": {"cpus": "1", "numa_nodes": [0], "devices": {"numa-align/numa-01": 1}}})
    cell0, cell1 = view_of(obj, pods=[pod("a/p", "w")]).cells
    assert [h.devices for h in cell0.holds] == [{"numa-align/numa-01": 1}] and cell1.holds == ()


def test_allocation_of_a_pod_now_on_another_node():
    view = view_of(two_cell_worker(), pods=[pod("default/pinned-a", "worker-2"), pod("default/pinned-b", "worker-1"),
                                            pod("ml/trainer-7f9c", "worker-1")])
    assert view.warnings == ("allocation of default/pinned-a: the pod runs on worker-2, not worker-1 (stale entry)",)
    assert [p.exists for p in view.pods] == [False, True, True]


def test_without_the_annotation_counts_only():
    obj = two_cell_worker()
    del obj["metadata"]["annotations"]
    view = view_of(obj)
    assert not view.allocations_published and view.pods == () and view.warnings == ()
    cell0 = view.cells[0]
    assert cell0.holds == () and [s.state for s in cell0.squares()] == ["reserved", "unknown", "unknown", "unknown"]
    assert [state for state, _, _ in cell0.memory_segments()] == ["reserved", "unknown", "free"]


def test_unreadable_annotation_warns_and_shows_counts():
    obj = two_cell_worker()
    obj["metadata"]["annotations"][ALLOCATIONS_ANNOTATION] = "{not json"
    view = view_of(obj)
    assert not view.allocations_published
    assert view.warnings[0].startswith(f"annotation {ALLOCATIONS_ANNOTATION} is not JSON")


def test_pod_spanning_two_cells_fills_each_cells_count_in_order():
    obj = nrt("w", [zone(0, cpu=(4, 4, 2), memory=(GI, GI, GI)), zone(1, cpu=(4, 4, 2), memory=(GI, GI, GI))],
              allocations={"x/wide": {"cpus": "1-4", "numa_nodes": [0, 1]}}, policy="restricted")
    cell0, cell1 = view_of(obj, pods=[pod("x/wide", "w")]).cells
    assert (cell0.holds[0].cpus, cell1.holds[0].cpus) == ((1, 2), (3, 4))
    assert cell0.holds[0].spans == (0, 1)


def test_quantities_are_parsed_leniently():
    obj = nrt("q", [{"name": "node-0", "type": "Node", "resources": [
        {"name": "cpu", "capacity": "4000m", "allocatable": "3", "available": "1500m"},
        {"name": "memory", "capacity": "8Gi", "allocatable": "8192Mi", "available": "4G"},
        {"name": "hugepages-1Gi", "capacity": "2Gi", "allocatable": "2147483648"},
        {"name": "numa-align/numa-0", "capacity": "lots", "allocatable": "3", "available": "3"},
    ]}])
    parsed = parse_nrt(obj)
    resources = parsed.zones[0].resources
    assert resources["cpu"] == Amount(4, 3, 1)
    assert resources["memory"] == Amount(8 * GI, 8 * GI, 4 * 10**9)
    assert resources["hugepages-1Gi"] == Amount(2 * GI, 2 * GI, 2 * GI)  # available missing: allocatable
    assert "numa-align/numa-0" not in resources
    assert any("'lots' is not a Kubernetes quantity" in w for w in parsed.warnings)


def test_owner_reference_names_the_node_and_filter_keeps_one():
    obj = nrt("worker-1", [zone(0, cpu=(1, 1, 1))])
    obj["metadata"]["name"] = "nrt-worker-1"
    views = build_views([obj], [node("worker-1"), node("worker-2")], [], only="worker-1")
    assert [(v.name, v.has_nrt, v.warnings) for v in views] == [("worker-1", True, ())]


def test_allocations_annotation_format():
    allocations = {"ns/p": {"cpus": "2-3,6", "numa_nodes": [0], "memory": {"0": 1024},
                            "devices": {"numa-align/numa-0": 1}}}
    obj = nrt("n", [zone(0, cpu=(8, 8, 5))])
    obj["metadata"]["annotations"] = {ALLOCATIONS_ANNOTATION: json.dumps(allocations)}
    alloc = parse_nrt(obj).allocations["ns/p"]
    assert (alloc.cpus, alloc.numa_nodes, dict(alloc.memory), dict(alloc.devices)) == \
        ((2, 3, 6), (0,), {0: 1024}, {"numa-align/numa-0": 1})
