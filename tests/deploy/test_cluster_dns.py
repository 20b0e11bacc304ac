"""Cluster DNS as the cluster_dns stage renders it: CoreDNS behind the Service the kubelets name, able to
bind port 53 and nothing more, and a checksum that decides whether the stage applies anything."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from numalab.deploy.cluster_dns import coredns_manifest
from numalab.deploy.manifests import MANIFEST_CHECKSUM, manifest_checksum
from numalab.deploy.node import kubelet_config_text
from numalab.model.cluster import Cluster
from numalab.model.kubelet import KubeletSettings, kubelet_policy
from numalab.model.topology import Topology
from tests.fakehost import fake_host

IMAGE = "registry:5000/numa-lab/coredns:1.15.0"
stage = importlib.import_module("numalab.deploy.cluster_dns")  # the module (the package exports its function)


def documents(text: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc}


def test_the_service_sits_at_the_address_the_kubelets_hand_to_pods(cluster: Cluster) -> None:
    service = documents(coredns_manifest(cluster, IMAGE))["Service"]
    topology = Topology.from_dict({"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}]})
    kubelet = yaml.safe_load(kubelet_config_text(cluster, kubelet_policy(topology, KubeletSettings.from_dict({}))))
    assert kubelet["clusterDNS"] == [service["spec"]["clusterIP"]] == ["10.96.0.10"]
    assert service["metadata"] == {"name": "kube-dns", "namespace": "kube-system",
                                   "labels": {"app.kubernetes.io/name": "coredns", "k8s-app": "kube-dns"}}
    assert {(p["port"], p["protocol"]) for p in service["spec"]["ports"]} == {(53, "UDP"), (53, "TCP")}


def test_coredns_binds_port_53_with_one_capability_and_asks_no_cpu(cluster: Cluster) -> None:
    docs = documents(coredns_manifest(cluster, IMAGE))
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE and container["args"] == ["-conf", "/etc/coredns/Corefile"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert "cpu" not in container["resources"]["requests"] and "cpu" not in container["resources"]["limits"]
    assert pod["dnsPolicy"] == "Default"  # CoreDNS never resolves through itself
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"] == "coredns"
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]
    verbs = {verb for rule in docs["ClusterRole"]["rules"] for verb in rule["verbs"]}
    assert verbs == {"list", "watch"}  # reads only


def test_the_corefile_serves_the_cluster_domain_and_forwards_nowhere(cluster: Cluster) -> None:
    corefile = documents(coredns_manifest(cluster, IMAGE))["ConfigMap"]["data"]["Corefile"]
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa" in corefile
    assert "forward" not in corefile  # the lab's network is isolated: nothing to forward to
    assert {"health", "ready", "reload", "loop"} <= {line.split()[0] for line in corefile.splitlines() if line.strip()}


def test_the_checksum_follows_the_manifest(cluster: Cluster) -> None:
    text = coredns_manifest(cluster, IMAGE)
    assert coredns_manifest(cluster, IMAGE) == text
    checksum = manifest_checksum(text, "Deployment")
    assert documents(text)["Deployment"]["metadata"]["annotations"][MANIFEST_CHECKSUM] == checksum
    assert manifest_checksum(coredns_manifest(cluster, IMAGE.replace("1.15.0", "1.15.1")), "Deployment") != checksum


def planned(monkeypatch, cluster: Cluster, live: str | None, ready: bool) -> tuple[bool, list[str]]:  # noqa: ANN001
    """cluster_dns on a @fake control-plane host whose API shows a Deployment with checksum `live` (None: none),
    rolled out or not; then, as deploys/cluster.py does at the end of a run, cluster_dns_rolled_out if asked.
    (whether a rollout is still to come, the names of the operations planned)."""
    monkeypatch.setattr(stage.context, "cluster_of", lambda host: cluster)
    monkeypatch.setattr(stage.context, "state_dir", lambda host: Path("/nowhere"))
    monkeypatch.setattr(stage.controller, "binaries", lambda host: type("B", (), {"version": "v1.36.3"})())
    monkeypatch.setattr(stage, "coredns_image", lambda cluster, version: IMAGE)
    monkeypatch.setattr(stage, "live_checksum", lambda kubeconfig: live)
    monkeypatch.setattr(stage.api, "deployment_ready", lambda kubeconfig, namespace, name: ready)
    with fake_host() as host:
        pending = stage.cluster_dns()
        if pending:
            stage.cluster_dns_rolled_out()
        names = [host.state.get_op_meta(op_hash).names for op_hash in host.state.get_op_order()]
    return pending, [sorted(n)[0] for n in names]


def test_coredns_is_applied_in_place_and_waited_for_last_and_a_current_one_is_left_alone(monkeypatch,
                                                                                         cluster: Cluster) -> None:
    current = manifest_checksum(coredns_manifest(cluster, IMAGE), "Deployment")
    assert planned(monkeypatch, cluster, None, False) == (True, [
        "cluster_dns | Apply CoreDNS and the kube-dns Service at 10.96.0.10",
        "cluster_dns_rolled_out | Wait until CoreDNS is rolled out"])
    assert planned(monkeypatch, cluster, current, False) == (True, [
        "cluster_dns_rolled_out | Wait until CoreDNS is rolled out"])
    assert planned(monkeypatch, cluster, current, True)[0] is False  # a second run: nothing to apply or wait for
    assert planned(monkeypatch, cluster, "older", True) == (True, [
        "cluster_dns | Apply CoreDNS and the kube-dns Service at 10.96.0.10",
        "cluster_dns_rolled_out | Wait until CoreDNS is rolled out"])
