"""The cluster model: who runs pods, the pod CIDR and route plan, names and addresses, refused inventories."""

from __future__ import annotations

import ipaddress

import pytest

from numalab.model.cluster import Cluster, choose_distribution, cluster_from_groups
from numalab.model.errors import ValidationError


def test_nodes_are_the_agents_in_name_order_and_the_server_runs_no_pods_by_default(cluster: Cluster) -> None:
    assert cluster.node_names == ("worker-a", "worker-b")
    assert cluster.server.name == "server" and not cluster.server.runs_pods
    assert [(h.role, h.runs_pods) for h in cluster.nodes] == [("agent", True), ("agent", True)]
    assert cluster.registry is not None and cluster.registry.role == "registry"
    with pytest.raises(KeyError, match="server runs no kubelet in cluster t .nodes: worker-a, worker-b"):
        cluster.node("server")


def test_a_server_that_runs_pods_is_a_node_in_name_order(groups) -> None:
    groups["rke2_servers"] = [("control", "10.77.0.10", {"k8s_server_runs_pods": True})]
    cluster = cluster_from_groups("t", groups)
    assert cluster.node_names == ("control", "worker-a", "worker-b")
    assert cluster.node("control").role == "server"


def test_pod_cidrs_skip_the_first_block_and_never_overlap(cluster: Cluster) -> None:
    assert str(cluster.pod_cidr("worker-a")) == "10.244.1.0/24"
    assert str(cluster.pod_cidr("worker-b")) == "10.244.2.0/24"
    cidrs = [cluster.pod_cidr(name) for name in cluster.node_names]
    assert all(cidr.subnet_of(cluster.cluster_cidr) for cidr in cidrs)
    assert not cidrs[0].overlaps(cidrs[1])
    assert not any(cidr.overlaps(cluster.service_cidr) for cidr in cidrs)
    with pytest.raises(KeyError):
        cluster.pod_cidr("registry")


def test_pod_routes_lead_to_every_other_node(cluster: Cluster) -> None:
    route = ipaddress.IPv4Network, ipaddress.IPv4Address
    assert cluster.pod_routes("worker-a") == [(route[0]("10.244.2.0/24"), route[1]("10.77.0.12"))]
    assert cluster.pod_routes("worker-b") == [(route[0]("10.244.1.0/24"), route[1]("10.77.0.11"))]


def test_a_single_node_has_no_routes(groups) -> None:
    groups["rke2_agents"] = [("worker-a", "10.77.0.11", {})]
    assert cluster_from_groups("t", groups).pod_routes("worker-a") == []


def test_names_and_addresses(cluster: Cluster) -> None:
    assert cluster.hosts_entries() == {
        "server": "10.77.0.10",
        "worker-a": "10.77.0.11",
        "worker-b": "10.77.0.12",
        "registry": "10.77.0.5",
    }
    assert str(cluster.kubernetes_service_ip) == "10.96.0.1"
    assert str(cluster.dns_service_ip) == "10.96.0.10"
    assert cluster.registry_endpoint == "registry:5000"
    assert cluster.apiserver_url == "https://10.77.0.10:6443"


def test_hosts_entries_list_a_server_that_runs_pods_once_and_no_registry_when_absent(groups) -> None:
    groups["rke2_servers"] = [("server", "10.77.0.10", {"k8s_server_runs_pods": True})]
    del groups["registry"]
    cluster = cluster_from_groups("t", groups)
    assert cluster.registry is None and cluster.registry_endpoint is None
    assert cluster.hosts_entries() == {"server": "10.77.0.10", "worker-a": "10.77.0.11", "worker-b": "10.77.0.12"}


def test_other_ranges() -> None:
    cluster = cluster_from_groups(
        "t",
        {"rke2_servers": [("s", "192.168.1.2", {})], "rke2_agents": [("a", "192.168.1.3", {})]},
        service_cidr="172.20.0.0/16",
        cluster_cidr="172.21.0.0/20",
    )
    assert str(cluster.kubernetes_service_ip) == "172.20.0.1"
    assert str(cluster.dns_service_ip) == "172.20.0.10"
    assert str(cluster.pod_cidr("a")) == "172.21.1.0/24"


def refused(groups, **ranges) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        cluster_from_groups("t", groups, **ranges)
    return caught.value


@pytest.mark.parametrize("servers", [[], [("s1", "10.77.0.10", {}), ("s2", "10.77.0.13", {})]])
def test_exactly_one_server(groups, servers) -> None:
    groups["rke2_servers"] = servers
    error = refused(groups)
    assert error.field == "inventory.rke2_servers" and f"got {len(servers)}" in error.message


def test_at_most_one_registry(groups) -> None:
    groups["registry"] = [("registry", "10.77.0.5", {}), ("registry2", "10.77.0.6", {})]
    assert refused(groups).field == "inventory.registry"


def test_some_host_runs_pods(groups) -> None:
    groups["rke2_agents"] = []
    error = refused(groups)
    assert error.field == "inventory.rke2_agents" and "k8s_server_runs_pods" in error.message


@pytest.mark.parametrize("name", ["Worker-A", "worker_a", "-worker", "worker-", "a" * 64, ""])
def test_node_names_are_dns_labels(groups, name) -> None:
    groups["rke2_agents"][0] = (name, "10.77.0.12", {})
    assert refused(groups).field == f"inventory.{name}"


@pytest.mark.parametrize("address", ["10.77.0", "worker-b.lab", "fd00::12", "10.77.0.256"])
def test_addresses_are_ipv4(groups, address) -> None:
    groups["rke2_agents"][0] = ("worker-b", address, {})
    error = refused(groups)
    assert error.field == "inventory.worker-b.address" and repr(address) in error.message


def test_a_host_is_in_one_role_with_its_own_address(groups) -> None:
    groups["rke2_agents"].append(("server", "10.77.0.20", {}))
    error = refused(groups)
    assert error.field == "inventory.server" and "server is already server (server)'s" in error.message
    groups["rke2_agents"][-1] = ("worker-c", "10.77.0.5", {})
    error = refused(groups)
    assert error.field == "inventory.registry" and "10.77.0.5 is already worker-c (agent)'s" in error.message


def test_ranges_are_networks_that_do_not_overlap_and_hold_every_node(groups) -> None:
    error = refused(groups, service_cidr="10.96.0.0/33")
    assert error.field == "k8s_service_cidr" and "'10.96.0.0/33'" in error.message
    assert refused(groups, cluster_cidr="10.244.0.1/16").field == "k8s_cluster_cidr"  # host bits set
    error = refused(groups, cluster_cidr="10.96.0.0/16")
    assert error.field == "k8s_cluster_cidr" and "overlaps the service range 10.96.0.0/12" in error.message
    # two nodes need the unused first /24 and one each: three
    error = refused(groups, cluster_cidr="10.244.0.0/23")
    assert error.field == "k8s_cluster_cidr" and "no /24 for each of 2 nodes" in error.message
    assert refused(groups, cluster_cidr="10.244.0.0/25").field == "k8s_cluster_cidr"
    assert cluster_from_groups("t", groups, cluster_cidr="10.244.0.0/22").pod_cidr("worker-b").prefixlen == 24


def test_choose_distribution() -> None:
    assert choose_distribution("auto") == ("upstream", "auto: no RKE2 artifacts or version configured")
    assert choose_distribution("auto", ["rke2_version"]) == ("rke2", "auto: RKE2 is configured (rke2_version)")
    assert choose_distribution("auto", ["k8s_binaries"])[0] == "upstream"  # not an RKE2 key
    assert choose_distribution("upstream", ["rke2_version"])[0] == "upstream"
    assert choose_distribution("rke2")[0] == "rke2"
    with pytest.raises(ValidationError) as caught:
        choose_distribution("kubeadm")
    assert caught.value.field == "k8s_distribution" and "'kubeadm'" in caught.value.message
