"""What the cluster PKI is made for: cluster name, control-plane server, kubelet nodes, registry. No I/O.

Names end up in certificate SANs, kubeconfig entries and file paths (`nodes/<name>/`), so they are
checked here as RFC 1123 names; every error names the field (e.g. `nodes[1].address`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from numalab.model.errors import ValidationError

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
API_PORT = 6443
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class Host:
    """A machine a certificate names: its DNS name and IPv4 address (a string is accepted and parsed)."""

    name: str
    address: ipaddress.IPv4Address | str


@dataclass(frozen=True)
class PkiSpec:
    """Inputs of `ensure_pki`; construction validates and normalizes addresses to IPv4Address.

    `admin_server_url` is where the controller reaches the API server (default https://<server address>:6443).
    """

    cluster: str
    server: Host
    nodes: tuple[Host, ...] = ()
    registry: Host | None = None
    service_cidr: str = DEFAULT_SERVICE_CIDR
    admin_server_url: str | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, str) or not _CLUSTER_NAME.match(self.cluster):
            raise ValidationError(
                "cluster", f"expected 1-63 letters, digits, '.', '_' or '-' (starting alnum), got {self.cluster!r}"
            )
        server = _checked_host(self.server, "server")
        nodes = tuple(_checked_host(node, f"nodes[{i}]") for i, node in enumerate(self.nodes))
        _refuse_duplicates(nodes)
        for i, node in enumerate(nodes):
            if node.name == server.name and node.address != server.address:
                raise ValidationError(
                    f"nodes[{i}].address",
                    f"node {node.name!r} is the server but has address {node.address}, the server has {server.address}",
                )
        registry = None if self.registry is None else _checked_host(self.registry, "registry")
        object.__setattr__(self, "server", server)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "registry", registry)
        _service_network(self.service_cidr)
        url = self.admin_server_url
        if url is not None and (not isinstance(url, str) or not re.match(r"^https://[^/\s]+(:\d+)?/?$", url)):
            raise ValidationError("admin_server_url", f"expected https://<host>[:port], got {url!r}")

    @property
    def service_ip(self) -> ipaddress.IPv4Address:
        """The `kubernetes` Service's cluster IP: the first address of the service CIDR (10.96.0.1 by default)."""
        return _service_network(self.service_cidr).network_address + 1

    @property
    def server_url(self) -> str:
        """The URL kubelets use: the server's address on the lab network."""
        return f"https://{self.server.address}:{API_PORT}"

    @property
    def admin_url(self) -> str:
        return self.admin_server_url or self.server_url


def _checked_host(host: Any, where: str) -> Host:
    if not isinstance(host, Host):
        raise ValidationError(where, f"expected a Host(name, address), got {type(host).__name__}")
    name = host.name
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{where}.name", "must not be empty")
    if len(name) > 253 or not _DNS_NAME.match(name):
        raise ValidationError(
            f"{where}.name", f"expected a lowercase RFC 1123 DNS name (letters, digits, '-', '.'), got {name!r}"
        )
    try:
        address = ipaddress.IPv4Address(str(host.address))
    except ValueError:
        raise ValidationError(
            f"{where}.address", f"expected an IPv4 address like 10.77.0.10, got {host.address!r}"
        ) from None
    return Host(name, address)


def _refuse_duplicates(nodes: tuple[Host, ...]) -> None:
    names: dict[str, int] = {}
    addresses: dict[Any, int] = {}
    for i, node in enumerate(nodes):
        if node.name in names:
            raise ValidationError(f"nodes[{i}].name", f"duplicate node {node.name!r} (also nodes[{names[node.name]}])")
        if node.address in addresses:
            other = addresses[node.address]
            raise ValidationError(
                f"nodes[{i}].address", f"{node.address} is already the address of nodes[{other}] ({nodes[other].name})"
            )
        names[node.name] = i
        addresses[node.address] = i


def _service_network(cidr: Any) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(str(cidr))
    except ValueError:
        raise ValidationError(
            "service_cidr", f"expected an IPv4 network like {DEFAULT_SERVICE_CIDR}, got {cidr!r}"
        ) from None
    if network.num_addresses < 4:
        raise ValidationError("service_cidr", f"{network} is too small for a service range")
    return network
