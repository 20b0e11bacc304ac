"""The cluster as data: which host is the control plane, which run pods, the registry, and the address plan.

Pure: built from the inventory's groups and host data by the deploy, tested on its own. Pod CIDRs are
given out here, one per pod-running node in name order, so every node's CNI config and routes can be
written before any kubelet registers (the deploy creates each Node object with its podCIDR; the
controller-manager's range allocator then counts them as taken).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numalab.model.cluster_keys import check_agreement
from numalab.model.errors import ValidationError

DISTRIBUTIONS = ("auto", "rke2", "upstream")
NUMA_ALIGN_INSTALLS = ("systemd", "daemonset")
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
DEFAULT_NODE_CIDR_PREFIX = 24
REGISTRY_PORT = 5000
APISERVER_PORT = 6443
CLUSTER_DOMAIN = "cluster.local"
_NODE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ClusterHost:
    """One inventory host as the cluster sees it."""

    name: str  # the Kubernetes node name (lower-case DNS label)
    address: ipaddress.IPv4Address
    role: str  # "server", "agent" or "registry"
    runs_pods: bool


@dataclass(frozen=True)
class Cluster:
    name: str
    server: ClusterHost
    nodes: tuple[ClusterHost, ...]  # hosts that run a kubelet, in name order
    registry: ClusterHost | None
    service_cidr: ipaddress.IPv4Network = ipaddress.IPv4Network(DEFAULT_SERVICE_CIDR)
    cluster_cidr: ipaddress.IPv4Network = ipaddress.IPv4Network(DEFAULT_CLUSTER_CIDR)
    node_cidr_prefix: int = DEFAULT_NODE_CIDR_PREFIX

    @property
    def kubernetes_service_ip(self) -> ipaddress.IPv4Address:
        """The first address of the service range: the `kubernetes` service, a SAN of the apiserver cert."""
        return self.service_cidr.network_address + 1

    @property
    def dns_service_ip(self) -> ipaddress.IPv4Address:
        """The cluster DNS Service's address: the tenth of the service range (10.96.0.10), as kubeadm has it."""
        return self.service_cidr.network_address + 10

    @property
    def apiserver_url(self) -> str:
        return f"https://{self.server.address}:{APISERVER_PORT}"

    @property
    def registry_endpoint(self) -> str | None:
        """`registry:5000`: the name every node resolves through /etc/hosts, and the TLS name."""
        return f"{self.registry.name}:{REGISTRY_PORT}" if self.registry else None

    def node(self, name: str) -> ClusterHost:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"{name} runs no kubelet in cluster {self.name} (nodes: {', '.join(self.node_names)})")

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    def pod_cidr(self, name: str) -> ipaddress.IPv4Network:
        """Node i (name order) gets the (i+1)-th /node_cidr_prefix of the cluster CIDR; the 0th is left unused."""
        index = self.node_names.index(self.node(name).name)
        subnets = self.cluster_cidr.subnets(new_prefix=self.node_cidr_prefix)
        for _ in range(index + 1):
            next(subnets)
        return next(subnets)

    def pod_routes(self, name: str) -> list[tuple[ipaddress.IPv4Network, ipaddress.IPv4Address]]:
        """(other node's pod CIDR, its address): one L2 network, so a plain route per node, no overlay.

        `name` may be a host that runs no pods (the server): it gets a route to every node's pods, which is
        how a pod's connection to the `kubernetes` Service (DNATed to the server) finds its way back.
        """
        return [(self.pod_cidr(other.name), other.address) for other in self.nodes if other.name != name]

    def hosts_entries(self) -> dict[str, str]:
        """Name -> address of every cluster host, for /etc/hosts on each of them."""
        hosts = [self.server, *self.nodes, *([self.registry] if self.registry else [])]
        return {host.name: str(host.address) for host in hosts}


RKE2_KEYS = ("rke2_artifacts_dir", "rke2_install", "rke2_version")


def choose_distribution(asked: str, configured: Iterable[str] = ()) -> tuple[str, str]:
    """(distribution, why). `auto` picks rke2 when RKE2 is configured (any of RKE2_KEYS set), else upstream.

    No network probe: the project's machines reach no RKE2 release, so `auto` asks none.
    """
    if asked not in DISTRIBUTIONS:
        raise ValidationError("k8s_distribution", f"expected one of {', '.join(DISTRIBUTIONS)}, got {asked!r}")
    configured = [key for key in configured if key in RKE2_KEYS]
    if asked != "auto":
        return asked, "asked for"
    if configured:
        return "rke2", f"auto: RKE2 is configured ({', '.join(configured)})"
    return "upstream", "auto: no RKE2 artifacts or version configured"


def cluster_from_groups(
    name: str,
    groups: Mapping[str, Iterable[tuple[str, str, Mapping[str, Any]]]],
    service_cidr: str = DEFAULT_SERVICE_CIDR,
    cluster_cidr: str = DEFAULT_CLUSTER_CIDR,
) -> Cluster:
    """The cluster from inventory groups `registry`, `rke2_servers`, `rke2_agents`: (node name, address, data).

    A server runs pods when its data says `k8s_server_runs_pods: true`; agents always do.
    """
    servers = list(groups.get("rke2_servers", ()))
    if len(servers) != 1:
        raise ValidationError("inventory.rke2_servers", f"expected exactly one control-plane host, got {len(servers)}")
    registries = list(groups.get("registry", ()))
    if len(registries) > 1:
        raise ValidationError("inventory.registry", f"expected at most one registry host, got {len(registries)}")
    server_name, server_address, server_data = servers[0]
    server = _host(server_name, server_address, "server", bool(server_data.get("k8s_server_runs_pods", False)))
    agents = [_host(n, a, "agent", True) for n, a, _ in groups.get("rke2_agents", ())]
    nodes = sorted(([server] if server.runs_pods else []) + agents, key=lambda h: h.name)
    if not nodes:
        raise ValidationError("inventory.rke2_agents", "no host runs pods: add agents or set k8s_server_runs_pods")
    registry = _host(*registries[0][:2], "registry", False) if registries else None
    _check_unique([server, *agents, *([registry] if registry else [])])
    check_agreement([(server.name, server_data, server.runs_pods)]
                    + [(n, data, True) for n, _, data in groups.get("rke2_agents", ())]
                    + [(n, data, False) for n, _, data in registries])
    services = _network(service_cidr, "k8s_service_cidr")
    pods = _network(cluster_cidr, "k8s_cluster_cidr")
    if services.overlaps(pods):
        raise ValidationError("k8s_cluster_cidr", f"{pods} overlaps the service range {services}")
    if len(nodes) + 1 > 2 ** (DEFAULT_NODE_CIDR_PREFIX - pods.prefixlen):
        raise ValidationError(
            "k8s_cluster_cidr", f"{pods} has no /{DEFAULT_NODE_CIDR_PREFIX} for each of {len(nodes)} nodes"
        )
    return Cluster(name, server, tuple(nodes), registry, services, pods)


def _host(name: str, address: str, role: str, runs_pods: bool) -> ClusterHost:
    if not _NODE_NAME.match(name):
        raise ValidationError(f"inventory.{name}", "a node name must be a lower-case DNS label (a-z, 0-9, -)")
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise ValidationError(f"inventory.{name}.address", f"{address!r} is not an IPv4 address") from None
    return ClusterHost(name, ip, role, runs_pods)


def _check_unique(hosts: list[ClusterHost]) -> None:
    """Registry, server and agents are distinct hosts: one name and one address each."""
    seen: dict[object, str] = {}
    for host in hosts:
        for key in (host.name, host.address):
            if key in seen:
                raise ValidationError(f"inventory.{host.name}", f"{key} is already {seen[key]}'s")
            seen[key] = f"{host.name} ({host.role})"


def _network(value: str, where: str) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as exc:
        raise ValidationError(where, f"{value!r} is not an IPv4 network: {exc}") from None
