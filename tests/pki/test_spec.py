"""The PKI spec refuses bad names and addresses, naming the field, and derives the URLs and service IP."""

from __future__ import annotations

import ipaddress

import pytest

from numalab.model.errors import ValidationError
from numalab.pki import Host
from tests.pki.conftest import SERVER, lab_spec


def refused(**changes: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        lab_spec(**changes)
    return info.value


def test_defaults_and_normalized_addresses() -> None:
    spec = lab_spec()
    assert spec.service_ip == ipaddress.IPv4Address("10.96.0.1")
    assert spec.server.address == ipaddress.IPv4Address("10.77.0.10")
    assert spec.nodes[1].address == ipaddress.IPv4Address("10.77.0.12")
    assert spec.server_url == spec.admin_url == "https://10.77.0.10:6443"
    assert lab_spec(admin_server_url="https://127.0.0.1:16443").admin_url == "https://127.0.0.1:16443"
    assert lab_spec(service_cidr="10.43.0.0/16").service_ip == ipaddress.IPv4Address("10.43.0.1")


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"cluster": ""}, "cluster", "got ''"),
        ({"server": Host("server", "10.77.0.300")}, "server.address", "'10.77.0.300'"),
        ({"server": Host("", "10.77.0.10")}, "server.name", "must not be empty"),
        ({"server": Host("Server_1", "10.77.0.10")}, "server.name", "'Server_1'"),
        ({"registry": Host("registry", "fe80::1")}, "registry.address", "IPv4"),
        ({"nodes": (Host("w", "10.77.0.11"), Host("w", "10.77.0.12"))}, "nodes[1].name", "duplicate node 'w'"),
        ({"nodes": (Host("a", "10.77.0.11"), Host("b", "10.77.0.11"))}, "nodes[1].address", "nodes[0] (a)"),
        ({"nodes": (Host("server", "10.77.0.99"),)}, "nodes[0].address", "is the server"),
        ({"service_cidr": "10.96.0.0/33"}, "service_cidr", "'10.96.0.0/33'"),
        ({"admin_server_url": "http://10.77.0.10:6443"}, "admin_server_url", "https://"),
        ({"nodes": ("worker-1",)}, "nodes[0]", "Host(name, address)"),
    ],
)
def test_refusals_name_the_field(changes: dict[str, object], field: str, words: str) -> None:
    error = refused(**changes)
    assert error.field == field
    assert words in error.message


def test_server_may_run_a_kubelet() -> None:
    spec = lab_spec(nodes=(SERVER, Host("worker-1", "10.77.0.11")))
    assert [node.name for node in spec.nodes] == ["server", "worker-1"]
