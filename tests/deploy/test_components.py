"""What the upstream components run with, and the files templates/k8s/ renders from it, parsed back."""

from __future__ import annotations

import configparser
import ipaddress
import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from numalab.deploy.control_plane import COMPONENT_KUBECONFIGS, SERVER_PUBLIC, SERVER_SECRETS
from numalab.model import components
from numalab.model.cluster import Cluster, cluster_from_groups
from numalab.model.kubelet import KubeletSettings, kubelet_configuration, kubelet_policy
from numalab.model.topology import Topology
from numalab.render import render


def all_components(cluster: Cluster) -> list[components.Component]:
    return [
        components.apiserver(cluster),
        components.controller_manager(cluster),
        components.scheduler(cluster),
        *(components.kubelet(cluster, name) for name in cluster.node_names),
    ]


def flags(component: components.Component) -> dict[str, str]:
    parsed = dict(arg.removeprefix("--").split("=", 1) for arg in component.args)
    assert len(parsed) == len(component.args), f"{component.name} repeats a flag"
    return parsed


def unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(text)
    return parser


def test_each_unit_runs_its_binary_with_every_arg(cluster: Cluster) -> None:
    for component in all_components(cluster):
        text = render("k8s/component.service.j2", component=component, environment={})
        parsed = unit(text)
        assert "Environment" not in parsed["Service"]
        # systemd joins lines that end in a backslash; an indented line without one would be a new key
        assert parsed["Service"]["ExecStart"].split(" \\\n") == [component.binary, *component.args]
        assert parsed["Unit"]["After"].split() == list(component.after)
        assert parsed["Unit"].get("Requires", "").split() == list(component.requires)
        assert parsed["Unit"]["Description"] == f"{component.description} (numa-lab)"
        assert parsed["Service"]["Restart"] == "always"
        assert parsed["Install"]["WantedBy"] == "multi-user.target"
        for arg in component.args:
            # one word each, and nothing systemd would expand (% specifiers, $ variables)
            assert arg.startswith("--") and not set(arg) & set(" \t%$\"'\\"), arg
        flags(component)


def test_apiserver_serves_the_cluster_from_the_servers_address(cluster: Cluster) -> None:
    apiserver = flags(components.apiserver(cluster))
    assert apiserver["advertise-address"] == "10.77.0.10"
    assert apiserver["service-cluster-ip-range"] == str(cluster.service_cidr)
    assert cluster.apiserver_url.endswith(f":{apiserver['secure-port']}")
    assert apiserver["etcd-servers"] == components.etcd_environment(cluster)["ETCD_ADVERTISE_CLIENT_URLS"]
    assert apiserver["service-account-issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert "etcd.service" in components.apiserver(cluster).after


def test_apiserver_stops_in_seconds_and_before_its_etcd(cluster: Cluster) -> None:
    """Its watches closed within seconds of a stop (the flag's default waits out a 60 s timeout), and etcd's stop
    or restart reaches it in one transaction, so it stops first (After= orders it) and never outlives its store."""
    apiserver = components.apiserver(cluster)
    assert flags(apiserver)["shutdown-watch-termination-grace-period"] == components.APISERVER_WATCH_DRAIN == "5s"
    assert apiserver.requires == ("etcd.service",) and "etcd.service" in apiserver.after
    parsed = unit(render("k8s/component.service.j2", component=apiserver, environment={}))
    assert parsed["Unit"]["Requires"] == "etcd.service"
    assert all(not c.requires for c in all_components(cluster) if c.name != "kube-apiserver")


def test_controller_manager_allocates_the_ranges_the_model_hands_out(cluster: Cluster) -> None:
    manager = flags(components.controller_manager(cluster))
    assert manager["cluster-cidr"] == str(cluster.cluster_cidr)
    assert manager["service-cluster-ip-range"] == str(cluster.service_cidr)
    assert int(manager["node-cidr-mask-size"]) == cluster.pod_cidr("worker-a").prefixlen
    assert manager["allocate-node-cidrs"] == "true"


def test_control_plane_files_are_the_ones_the_control_plane_stage_puts(cluster: Cluster) -> None:
    """Every PKI file a flag names is put by the control_plane stage (or is the CA, from the pki stage)."""
    put = {f"{components.PKI_DIR}/{name}" for name in (*SERVER_PUBLIC, *SERVER_SECRETS, "ca.crt")}
    put |= {f"{components.K8S_DIR}/{name}" for name in COMPONENT_KUBECONFIGS}
    named = {
        value
        for component in all_components(cluster)[:3]
        for value in flags(component).values()
        if value.startswith(components.K8S_DIR)
    }
    assert named == put


def test_kubelet_of_each_node(cluster: Cluster) -> None:
    for node in cluster.nodes:
        kubelet = components.kubelet(cluster, node.name)
        assert flags(kubelet) == {
            "config": "/var/lib/kubelet/config.yaml",
            "hostname-override": node.name,
            "kubeconfig": "/etc/kubernetes/kubelet.conf",
            "node-ip": str(node.address),
        }
        assert "containerd.service" in kubelet.after
    with pytest.raises(KeyError, match="server runs no kubelet"):
        components.kubelet(cluster, "server")


def test_etcd_default_file_sets_the_environment_for_a_shell(cluster: Cluster, tmp_path: Path) -> None:
    environment = components.etcd_environment(cluster)
    assert environment["ETCD_INITIAL_CLUSTER"] == "server=http://127.0.0.1:2380"
    path = tmp_path / "etcd"
    path.write_text(render("k8s/etcd.default.j2", environment=environment))
    # systemd's EnvironmentFile= and a shell read the same KEY="value" lines
    shown = subprocess.run(["env", "-i", "sh", "-c", f'set -a; . "{path}"; env'], capture_output=True,
                           text=True, check=True).stdout
    seen = dict(line.split("=", 1) for line in shown.splitlines() if line.startswith("ETCD_"))
    assert seen == environment


TWO_CELLS = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
)


def test_kubelet_configuration_is_the_policy_over_the_shared_part(cluster: Cluster) -> None:
    managers = kubelet_configuration(kubelet_policy(TWO_CELLS, KubeletSettings.from_dict({})))
    config = components.kubelet_configuration(cluster, managers)
    assert {key: config[key] for key in managers} == managers
    assert config["cpuManagerPolicy"] == "static" and config["memoryManagerPolicy"] == "Static"
    assert config["kind"] == "KubeletConfiguration" and config["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
    assert config["authentication"]["x509"]["clientCAFile"] == "/etc/kubernetes/pki/ca.crt"
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["cgroupDriver"] == "systemd"
    assert config["containerRuntimeEndpoint"] == "unix:///run/containerd/containerd.sock"
    assert config["tlsCertFile"] == "/var/lib/kubelet/pki/kubelet.crt"
    assert yaml.safe_load(yaml.safe_dump(config, sort_keys=False)) == config
    # the shared part alone is a valid config too (kubelet defaults for the managers)
    assert config["clusterDNS"] == ["10.96.0.10"] and config["clusterDomain"] == "cluster.local"
    # the shared part alone is a valid config too (kubelet defaults for the managers)
    assert "cpuManagerPolicy" not in components.kubelet_configuration(cluster, {})
    assert components.kubelet_configuration(cluster, {"cgroupDriver": "cgroupfs"})["cgroupDriver"] == "cgroupfs"


def test_kube_proxy_of_each_node(cluster: Cluster) -> None:
    proxy = components.kube_proxy(cluster, "worker-b")
    assert proxy.binary == "/usr/local/bin/kube-proxy"
    assert proxy.args == ("--config=/var/lib/kube-proxy/config.yaml",)
    config = components.kube_proxy_configuration(cluster, "worker-b")
    assert config["kind"] == "KubeProxyConfiguration"
    assert config["apiVersion"] == "kubeproxy.config.k8s.io/v1alpha1"
    assert config["mode"] == "iptables" and config["clusterCIDR"] == "10.244.0.0/16"
    assert config["hostnameOverride"] == "worker-b" and config["bindAddress"] == "10.77.0.12"
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/kube-proxy.conf"
    assert config["conntrack"] == {"maxPerCore": 0}
    # only hosts that run pods run a proxy
    with pytest.raises(KeyError):
        components.kube_proxy(cluster, "server")
    with pytest.raises(KeyError):
        components.kube_proxy_configuration(cluster, "registry")


def test_cni_conflist_bridges_the_nodes_pod_cidr(cluster: Cluster) -> None:
    for name in cluster.node_names:
        conflist = json.loads(json.dumps(components.cni_conflist(cluster, name)))
        bridge, portmap = conflist["plugins"]
        assert (bridge["type"], portmap["type"]) == ("bridge", "portmap")
        (pool,) = bridge["ipam"]["ranges"][0]
        subnet = ipaddress.IPv4Network(pool["subnet"])
        assert subnet == cluster.pod_cidr(name)
        assert ipaddress.IPv4Address(pool["gateway"]) == subnet.network_address + 1
        assert bridge["isGateway"] is True and bridge["ipMasq"] is False
    with pytest.raises(KeyError):
        components.cni_conflist(cluster, "registry")


def test_containerd_config(cluster: Cluster) -> None:
    sandbox = f"{cluster.registry_endpoint}/pause:3.10"
    config = tomllib.loads(render("k8s/containerd-config.toml.j2", sandbox_image=sandbox,
                                  cni_bin_dir=components.CNI_BIN_DIR, certs_dir=components.CONTAINERD_CERTS_DIR))
    assert config["version"] == 2
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry:5000/pause:3.10"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2" and runc["options"]["SystemdCgroup"] is True
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(Path(components.CNI_CONF).parent)}
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"


def test_registry_hosts_file_pulls_over_tls_with_the_cluster_ca(cluster: Cluster) -> None:
    hosts = tomllib.loads(render("k8s/hosts.toml.j2", endpoint=cluster.registry_endpoint,
                                 ca_file=components.CLUSTER_CA))
    assert hosts["server"] == "https://registry:5000"
    assert hosts["host"] == {
        "https://registry:5000": {
            "capabilities": ["pull", "resolve"],
            "ca": "/usr/local/share/ca-certificates/numa-lab-ca.crt",
        }
    }


def test_registry_config() -> None:
    config = yaml.safe_load(render("k8s/registry-config.yml.j2", port="5000", cert="/etc/docker/registry/r.crt",
                                   key="/etc/docker/registry/r.key"))
    assert config["http"] == {
        "addr": ":5000",
        "tls": {"certificate": "/etc/docker/registry/r.crt", "key": "/etc/docker/registry/r.key"},
    }
    assert config["storage"]["filesystem"]["rootdirectory"] == "/var/lib/docker-registry"


def exec_lines(text: str) -> list[str]:
    return [line.removeprefix("ExecStart=") for line in text.splitlines() if line.startswith("ExecStart=")]


def test_pod_routes_unit(cluster: Cluster, groups) -> None:
    text = render("k8s/pod-routes.service.j2", routes=cluster.pod_routes("worker-a"))
    assert exec_lines(text) == ["/usr/sbin/ip route replace 10.244.2.0/24 via 10.77.0.12"]
    parsed = unit(text)
    assert parsed["Service"]["Type"] == "oneshot" and parsed["Service"]["RemainAfterExit"] == "yes"
    assert parsed["Unit"]["Before"] == "kubelet.service"
    groups["rke2_agents"].append(("worker-c", "10.77.0.13", {}))
    three = cluster_from_groups("t", groups)
    assert exec_lines(render("k8s/pod-routes.service.j2", routes=three.pod_routes("worker-b"))) == [
        "/usr/sbin/ip route replace 10.244.1.0/24 via 10.77.0.11",
        "/usr/sbin/ip route replace 10.244.3.0/24 via 10.77.0.13",
    ]
    # a oneshot unit needs a command even on a single node
    assert exec_lines(render("k8s/pod-routes.service.j2", routes=[])) == ["/bin/true"]
    # the server runs no pods but answers them (the `kubernetes` Service): it routes to every node's pods
    assert exec_lines(render("k8s/pod-routes.service.j2", routes=three.pod_routes("server"))) == [
        "/usr/sbin/ip route replace 10.244.1.0/24 via 10.77.0.11",
        "/usr/sbin/ip route replace 10.244.2.0/24 via 10.77.0.12",
        "/usr/sbin/ip route replace 10.244.3.0/24 via 10.77.0.13",
    ]
