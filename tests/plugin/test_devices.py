"""Resource names, device ids and counts: the contract pods written for the Go plugin rely on."""

from __future__ import annotations

import pytest
from numa_align.devices import (
    build_devices,
    device_count,
    device_id,
    node_of_resource,
    parse_device_id,
    resource_name,
    socket_name,
)


def test_names_match_the_go_plugin():
    assert resource_name(3) == "numa-align/numa-3"
    assert socket_name(3) == "numa-3.sock"
    assert device_id(3, 41) == "numa-3-41"
    assert parse_device_id("numa-3-41") == (3, 41)
    assert parse_device_id("numa-3") is None and parse_device_id("gpu-0-1") is None


@pytest.mark.parametrize("node", [0, 3, 12])
def test_node_of_resource_reads_what_resource_name_writes(node: int):
    assert node_of_resource(resource_name(node)) == node


@pytest.mark.parametrize("name", [
    "cpu", "memory", "hugepages-2Mi", "example.com/gpu", "other.io/numa-3", "numa-align/gpu-3",
    "numa-align/numa-x", "numa-align/numa-", "numa-align/numa--1", "numa-align/numa-+1", "numa-align/numa-3x",
    "numa-align/numa-01", "numa-align/numa-00", "numa-align/numa-\u0663", "numa-align/numa-3\n", " numa-align/numa-3",
])
def test_node_of_resource_is_none_for_any_other_name(name: str):
    """Zero-padded ids, Arabic-Indic digits and a trailing newline included: the plugin never registers them."""
    assert node_of_resource(name) is None


def test_device_count_fixed_or_per_unreserved_cpu():
    cpus = frozenset(range(8))
    assert device_count(cpus, 100, frozenset({0})) == 100
    assert device_count(cpus, "cpus", frozenset({0, 1, 99})) == 6


def test_devices_carry_their_node_and_health():
    devices = build_devices(5, 2, healthy=False)
    assert [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in devices] == [
        ("numa-5-0", "Unhealthy", [5]),
        ("numa-5-1", "Unhealthy", [5]),
    ]
