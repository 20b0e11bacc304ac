"""The fleet spec: shapes known to the model, seeded expansion, and one-line refusals naming the field."""

from collections import Counter

import pytest

from numalab.fleet.errors import FleetError
from numalab.fleet.spec import DEFAULT_FLEET, SHAPES, expand, fleet_spec, load_spec, resolve_shape, shares


def spec(**data):
    return fleet_spec({"nodes": 10, "shapes": [{"shape": "2cell-16", "weight": 1}], **data})


def test_every_shape_resolves_with_numa_labs_policy():
    for name in SHAPES:
        shape = resolve_shape(name)
        assert 16 <= len(shape.topology.cpus) <= 64
        assert shape.policy.cpu_manager_policy == "static"
        assert [node.id for node in shape.host.nodes] == list(shape.topology.ids)


def test_the_shapes_cover_what_real_fleets_have():
    """2 and 4 cells, unequal distances, SMT, a memory-only cell, reserved CPUs that differ, and the policies."""
    shapes = {name: resolve_shape(name) for name in SHAPES}
    assert {len(s.topology.cells) for s in shapes.values()} >= {2, 3, 4}
    four = shapes["4cell-smt-64"].topology
    assert {four.distance(0, 1), four.distance(0, 2)} == {11, 21}
    assert shapes["2cell-smt-32"].topology.threads_per_core == 2
    assert shapes["2cell-smt-full-32"].policy.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert shapes["3cell-memonly-24"].topology.memory_only_cells
    reserved = {name: s.policy.reserved_cpus for name, s in shapes.items()}
    assert reserved["2cell-16"] == {0}
    assert reserved["2cell-smt-32"] == reserved["2cell-smt-full-32"] == {0, 1}  # 1 CPU reserved: its whole core
    assert reserved["2cell-reserved-32"] == {0, 16}
    assert reserved["4cell-smt-64"] == {0, 1, 2, 3}  # kube-reserved 2 + system-reserved 500m: 3 CPUs, 2 cores
    closest = shapes["4cell-closest-64"].policy
    assert (closest.topology_manager_policy, closest.topology_manager_policy_options) == (
        "restricted", {"prefer-closest-numa-nodes": "true"})


def test_expansion_is_seeded_and_exact():
    data = {"nodes": 50, "seed": 3, "shapes": [{"shape": "2cell-16", "weight": 2},
                                               {"shape": "4cell-smt-64", "weight": 1},
                                               {"shape": "3cell-memonly-24", "count": 7}]}
    first, again = expand(fleet_spec(data)), expand(fleet_spec(data))
    assert [(d.name, d.shape.name) for d in first] == [(d.name, d.shape.name) for d in again]
    assert Counter(d.shape.name for d in first) == {"2cell-16": 29, "4cell-smt-64": 14, "3cell-memonly-24": 7}
    assert [d.name for d in first[:2]] == ["fleet-00000", "fleet-00001"] and first[-1].index == 49
    assert expand(fleet_spec({**data, "prefix": "sim"}))[0].name == "sim-00000"
    other = expand(fleet_spec({**data, "seed": 4}))
    assert [d.shape.name for d in other] != [d.shape.name for d in first]


def test_nodes_of_one_shape_share_its_policy():
    fleet = expand(fleet_spec({**DEFAULT_FLEET, "nodes": 200}))
    by_shape = {}
    for desc in fleet:
        assert by_shape.setdefault(desc.shape.name, desc.shape) is desc.shape
    assert set(by_shape) == {entry["shape"] for entry in DEFAULT_FLEET["shapes"]}


def test_largest_remainder_shares():
    data = {"nodes": 10, "shapes": [{"shape": "2cell-16", "weight": 1}] * 3}
    assert shares(fleet_spec(data)) == [4, 3, 3]
    assert shares(fleet_spec({"nodes": 1, "shapes": [{"shape": "2cell-16", "weight": 0.5},
                                                     {"shape": "2cell-smt-32", "weight": 2}]})) == [0, 1]


def test_settings_override_the_shapes_kubelet_settings():
    data = {"nodes": 1, "shapes": [{"shape": "4cell-smt-64", "count": 1,
                                    "settings": {"topology-manager-scope": "container"}}]}
    (desc,) = expand(fleet_spec(data))
    assert desc.shape.policy.topology_manager_scope == "container"
    assert desc.shape.policy.kube_reserved == {"cpu": "2", "memory": "1Gi"}  # the shape's, kept


@pytest.mark.parametrize(("data", "field"), [
    ({"shapes": [{"shape": "8cell-huge", "weight": 1}]}, "fleet.shapes[0].shape: unknown shape '8cell-huge'"),
    ({"shapes": [{"shape": "2cell-16", "weight": 0}]}, "fleet.shapes[0].weight: expected a number > 0, got 0"),
    ({"shapes": [{"shape": "2cell-16", "weight": -2}]}, "fleet.shapes[0].weight"),
    ({"shapes": [{"shape": "2cell-16", "weight": "3"}]}, "fleet.shapes[0].weight"),
    ({"nodes": 0}, "fleet.nodes: expected a whole number >= 1, got 0"),
    ({"nodes": "5"}, "fleet.nodes"),
    ({"shapes": []}, "fleet.shapes: expected a non-empty list"),
    ({"shapes": [{"shape": "2cell-16", "weight": 1, "count": 2}]}, "fleet.shapes[0]: give weight or count, not both"),
    ({"shapes": [{"shape": "2cell-16"}]}, "fleet.shapes[0]: give weight or count, not neither"),
    ({"shapes": [{"shape": "2cell-16", "count": 11}]}, "fleet.nodes: 10 nodes, but the shapes' counts add up to 11"),
    ({"shapes": [{"shape": "2cell-16", "count": 9}]}, "no shape has a weight to fill the rest"),
    ({"shapes": [{"shape": "2cell-16", "count": 0}]}, "fleet.shapes[0].count"),
    ({"shapes": [{"shape": "2cell-16", "weight": 1, "colour": "red"}]}, "fleet.shapes[0].colour: unknown key"),
    ({"size": 3}, "fleet.size: unknown key"),
    ({"seed": "x"}, "fleet.seed"),
    ({"prefix": "Fleet_1"}, "fleet.prefix: expected lower-case letters"),
    ({"shapes": [{"shape": "2cell-16", "weight": 1, "settings": {"topology-manager-policy": "tight"}}]},
     "fleet.shapes[0].shape (2cell-16): settings.topology-manager-policy: 'tight' is not one of"),
])
def test_bad_input_is_one_line_naming_the_field(data, field):
    with pytest.raises(FleetError) as caught:
        spec(**data)
    assert field in str(caught.value)
    assert "\n" not in str(caught.value)


def test_not_a_mapping():
    with pytest.raises(FleetError, match="^fleet: expected a mapping"):
        fleet_spec(["2cell-16"])


def test_load_spec_reads_yaml(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("nodes: 3\nseed: 2\nshapes:\n  - {shape: 2cell-smt-32, weight: 1}\n")
    assert [d.shape.name for d in expand(load_spec(path))] == ["2cell-smt-32"] * 3
    path.write_text("nodes: 3\nshapes: [{shape: nope, weight: 1}]\n")
    with pytest.raises(FleetError, match=rf"^{path}.shapes\[0\].shape: unknown shape 'nope'"):
        load_spec(path)
    with pytest.raises(FleetError, match="cannot be read"):
        load_spec(tmp_path / "missing.yaml")
