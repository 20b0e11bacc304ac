"""The lab spec refuses bad shapes before anything is created, naming the guest and the field."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from numalab.lab.settings import check_subnet_free, settings_from_dict, settings_from_env
from numalab.lab.spec import lab_from_dict, stable_mac
from numalab.model.errors import ValidationError


def two_cells(**extra: Any) -> dict[str, Any]:
    guest = {
        "name": "worker-1",
        "numa": {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]},
    }
    guest.update(extra)
    return guest


def refused(guests: list[dict[str, Any]], settings: dict[str, Any] | None = None) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        lab_from_dict({"settings": settings or {}, "guests": guests})
    return info.value


def test_default_inventory_shape() -> None:
    from numalab.lab.inventory import DEFAULT_INVENTORY, lab_of_inventory

    lab = lab_of_inventory(DEFAULT_INVENTORY)
    shapes = {g.name: (g.vcpus, g.memory >> 30, len(g.topology.cells)) for g in lab.guests}
    assert shapes == {"registry": (1, 1, 1), "server": (2, 4, 1), "worker-1": (4, 4, 2), "worker-2": (4, 4, 2)}
    assert {g.name: g.groups for g in lab.guests} == {
        "registry": ("registry",),
        "server": ("rke2_servers",),
        "worker-1": ("rke2_agents",),
        "worker-2": ("rke2_agents",),
    }
    assert lab.settings.network == "isolated"


def test_addresses_are_allocated_in_order_and_macs_are_stable() -> None:
    lab = lab_from_dict({"guests": [two_cells(), two_cells(name="worker-2")]})
    assert [str(g.address) for g in lab.guests] == ["10.77.0.10", "10.77.0.11"]
    again = lab_from_dict({"guests": [two_cells(), two_cells(name="worker-2")]})
    assert [g.mac for g in lab.guests] == [g.mac for g in again.guests]
    assert lab.guests[0].mac != lab.guests[1].mac
    assert stable_mac("numa-lab", "worker-1").startswith("52:54:00:")


def test_declared_address_is_kept_and_skipped_by_allocation() -> None:
    lab = lab_from_dict({"guests": [two_cells(name="a"), two_cells(name="b", address="10.77.0.10")]})
    assert {g.name: str(g.address) for g in lab.guests} == {"a": "10.77.0.11", "b": "10.77.0.10"}


def test_vcpus_that_do_not_match_the_cells() -> None:
    error = refused([two_cells(vcpus=3)])
    assert error.field == "worker-1.vcpus"
    assert "cells hold 4 cpus" in str(error)


def test_overlapping_cpus() -> None:
    guest = two_cells()
    guest["numa"]["cells"][1]["cpus"] = "1-3"
    error = refused([guest])
    assert error.field == "worker-1.numa.cells[1].cpus"
    assert "cpu 1" in str(error)


def test_cpus_with_a_gap() -> None:
    guest = two_cells()
    guest["numa"]["cells"][1]["cpus"] = "3-4"
    error = refused([guest])
    assert error.field == "worker-1.numa.cells"


def test_memory_that_does_not_add_up() -> None:
    error = refused([two_cells(memory="3Gi")])
    assert error.field == "worker-1.memory"
    assert "4Gi" in str(error)


def test_duplicate_names() -> None:
    error = refused([two_cells(), two_cells()])
    assert error.field == "worker-1.name"
    assert "duplicate" in str(error)


def test_duplicate_addresses() -> None:
    error = refused([two_cells(address="10.77.0.20"), two_cells(name="worker-2", address="10.77.0.20")])
    assert error.field == "worker-2.address"
    assert "worker-1" in str(error)


def test_address_outside_the_subnet_or_on_the_gateway() -> None:
    assert refused([two_cells(address="10.78.0.5")]).field == "worker-1.address"
    assert refused([two_cells(address="10.77.0.1")]).field == "worker-1.address"


def test_single_cell_guest_from_vcpus_and_memory() -> None:
    lab = lab_from_dict({"guests": [{"name": "registry", "vcpus": 2, "memory": "1Gi"}]})
    guest = lab.guests[0]
    assert (guest.vcpus, guest.memory, guest.topology.ids) == (2, 1 << 30, (0,))


def test_guest_without_shape() -> None:
    assert refused([{"name": "registry"}]).field == "registry.numa"


def test_bad_topology_error_names_the_guest() -> None:
    guest = two_cells()
    guest["numa"]["distances"] = [[11, 20], [20, 10]]  # a node is 10 from itself
    assert refused([guest]).field.startswith("worker-1.numa.distances")


def test_cpu_topology_follows_the_cells() -> None:
    even = lab_from_dict({"guests": [two_cells()]}).guests[0]
    assert even.cpu_topology == (2, 2, 1)
    uneven = two_cells()
    uneven["numa"]["cells"][1]["cpus"] = "2"
    assert lab_from_dict({"guests": [uneven]}).guests[0].cpu_topology == (1, 3, 1)


def test_settings_from_env_defaults_and_overrides() -> None:
    defaults = settings_from_env({}, home=Path("/home/u"))
    assert defaults.name == "numa-lab"
    assert defaults.state_dir == Path("/home/u/.local/share/numa-lab/numa-lab")
    assert (defaults.network, str(defaults.subnet), defaults.domain_type) == ("isolated", "10.77.0.0/24", "auto")
    assert defaults.uri == "qemu:///system"
    assert defaults.cpu_shares is None  # libvirt's own default weight
    env = {
        "NUMALAB_NAME": "t1",
        "NUMALAB_NETWORK": "nat",
        "NUMALAB_SUBNET": "10.80.0.0/24",
        "NUMALAB_DOMAIN_TYPE": "qemu",
        "NUMALAB_URI": "qemu+ssh://root@vmhost/system",
        "NUMALAB_CPU_SHARES": "256",
    }
    custom = settings_from_env(env, home=Path("/home/u"))
    assert custom.cpu_shares == 256 and settings_from_dict(custom.to_dict()) == custom
    assert custom.state_dir == Path("/home/u/.local/share/numa-lab/t1")
    assert (custom.network, custom.domain_type, custom.uri) == ("nat", "qemu", "qemu+ssh://root@vmhost/system")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("NUMALAB_NETWORK", "bridged"),
        ("NUMALAB_SUBNET", "10.77.0.0/30"),
        ("NUMALAB_SUBNET", "not-a-net"),
        ("NUMALAB_DOMAIN_TYPE", "xen"),
        ("NUMALAB_URI", "xen:///system"),
        ("NUMALAB_NAME", "Bad_Name"),
        ("NUMALAB_CPU_SHARES", "1"),
        ("NUMALAB_CPU_SHARES", "lots"),
    ],
)
def test_bad_env_is_refused_naming_the_setting(variable: str, value: str) -> None:
    field = {
        "NUMALAB_NETWORK": "network",
        "NUMALAB_SUBNET": "subnet",
        "NUMALAB_DOMAIN_TYPE": "domain_type",
        "NUMALAB_URI": "uri",
        "NUMALAB_NAME": "name",
        "NUMALAB_CPU_SHARES": "cpu_shares",
    }[variable]
    with pytest.raises(ValidationError) as info:
        settings_from_env({variable: value})
    assert info.value.field == f"NUMALAB.{field}"


def test_subnet_colliding_with_a_route_is_refused() -> None:
    subnet = ipaddress.IPv4Network("10.77.0.0/24")
    routes = [("default", "eth0"), ("10.0.0.0/8", "eth1")]
    with pytest.raises(ValidationError) as info:
        check_subnet_free(subnet, routes, own_bridge="nlab1234", where="NUMALAB_SUBNET")
    assert info.value.field == "NUMALAB_SUBNET"
    assert "10.0.0.0/8" in str(info.value) and "eth1" in str(info.value)


def test_subnet_free_when_only_default_and_own_bridge_overlap() -> None:
    subnet = ipaddress.IPv4Network("10.77.0.0/24")
    routes = [("default", "eth0"), ("10.77.0.0/24", "nlab1234"), ("172.17.0.0/16", "docker0")]
    check_subnet_free(subnet, routes, "nlab1234")
