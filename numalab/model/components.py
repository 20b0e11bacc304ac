"""What each upstream Kubernetes component runs with: flags, config objects and paths on the hosts.

Pure data from the Cluster model; the deploy renders it into systemd units and files
(templates/k8s/). Paths follow kubeadm's layout, so an operator finds things where they expect them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.cluster import APISERVER_PORT, CLUSTER_DOMAIN, Cluster
from numalab.model.errors import ValidationError
from numalab.model.kubelet_policy import KubeletPolicy
from numalab.model.kubelet_state import checkpoint_reservations

BIN_DIR = "/usr/local/bin"
K8S_DIR = "/etc/kubernetes"
PKI_DIR = f"{K8S_DIR}/pki"
KUBELET_DIR = "/var/lib/kubelet"
KUBELET_CONFIG = f"{KUBELET_DIR}/config.yaml"
KUBELET_PKI_DIR = f"{KUBELET_DIR}/pki"
CNI_CONF = "/etc/cni/net.d/10-numalab.conflist"
CNI_BIN_DIR = "/usr/lib/cni"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROPIN = "/etc/systemd/system/containerd.service.d/numa-lab.conf"  # Debian's unit, numa-lab's environment
CONTAINERD_CERTS_DIR = "/etc/containerd/certs.d"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"
CLUSTER_CA = "/usr/local/share/ca-certificates/numa-lab-ca.crt"
# kube-proxy's config; base loads br_netfilter and sets bridge-nf-call-iptables, so a pod reaching a Service
# whose endpoint is on the same node's bridge gets its answer un-NATed.
KUBE_PROXY_CONFIG = "/var/lib/kube-proxy/config.yaml"
SERVICE_ACCOUNT_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"
# The kubelet's boot guard (numalab.checkpoint_guard) as one archive, run by the system python3 before each
# start: -S skips site-packages (it needs the standard library only, and starts faster), -E the environment.
KUBELET_GUARD = "/usr/local/lib/numa-lab/kubelet-guard.pyz"
GUARD_PYTHON = "/usr/bin/python3 -S -E"


@dataclass(frozen=True)
class Component:
    """A binary run as a systemd unit: `name` is the unit and the binary, `args` its flags in order;
    `pre_start` commands run before it, their failures ignored (ExecStartPre=-); `requires` are units it
    cannot run without (Requires=: their stop and restart reach it, in one transaction)."""

    name: str
    description: str
    args: tuple[str, ...]
    after: tuple[str, ...] = ("network-online.target",)
    pre_start: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()

    @property
    def binary(self) -> str:
        return f"{BIN_DIR}/{self.name}"


EMULATED_GO_MAX_PROCS = 1
"""GOMAXPROCS on a host emulated in software: with one P per vCPU an idle control plane kept 1.5 of the
lab's 2 host cores busy waking Ps on vCPUs the host emulates (server 62 % of a core, 45-51 % with one P)."""


def go_max_procs(setting: int | None, virtualization: str) -> int | None:
    """The GOMAXPROCS numa-lab's Go daemons get (None: Go's default, one P per CPU). `setting` is the
    `go_max_procs` host data (None: EMULATED_GO_MAX_PROCS when `virtualization` is "qemu", else Go's
    default; 0: Go's default); `virtualization` as systemd-detect-virt says."""
    if setting is None:
        return EMULATED_GO_MAX_PROCS if virtualization == "qemu" else None
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 0:
        raise ValidationError("go_max_procs", f"{setting!r} is not a whole number of CPUs (0: Go's default)")
    return setting or None


def go_environment(max_procs: int | None) -> dict[str, str]:
    """The environment that gives a Go daemon `max_procs` Ps; {} leaves Go's default."""
    return {} if max_procs is None else {"GOMAXPROCS": str(max_procs)}


def kubeconfig_path(user: str) -> str:
    return f"{K8S_DIR}/{user}.conf"


APISERVER_WATCH_DRAIN = "5s"
"""How long a stopping API server takes to close its watches. Without it (the flag's default, 0) a stop waits out the
HTTP server's 60 s shutdown timeout for the open watches: `systemctl stop kube-apiserver` took 61 s in the lab,
2-3 s with it. Requires=etcd.service matters too: `systemctl restart etcd kube-apiserver` queued etcd's stop
first, and the API server, left without its store, did not exit until systemd killed it after 90 s. With both,
that restart took 5 s and /readyz answered 30 s after it was asked (116-131 s before), idle lab."""


def apiserver(cluster: Cluster) -> Component:
    pki = PKI_DIR
    return Component(
        "kube-apiserver",
        "Kubernetes API server",
        (
            f"--advertise-address={cluster.server.address}",
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            f"--client-ca-file={pki}/ca.crt",
            "--enable-admission-plugins=NodeRestriction",
            "--etcd-servers=http://127.0.0.1:2379",
            f"--kubelet-certificate-authority={pki}/ca.crt",
            f"--kubelet-client-certificate={pki}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={pki}/apiserver-kubelet-client.key",
            "--kubelet-preferred-address-types=InternalIP",
            f"--secure-port={APISERVER_PORT}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki}/sa.pub",
            f"--service-account-signing-key-file={pki}/sa.key",
            f"--service-cluster-ip-range={cluster.service_cidr}",
            f"--tls-cert-file={pki}/apiserver.crt",
            f"--tls-private-key-file={pki}/apiserver.key",
            f"--shutdown-watch-termination-grace-period={APISERVER_WATCH_DRAIN}",
        ),
        after=("network-online.target", "etcd.service"),
        requires=("etcd.service",),
    )


def controller_manager(cluster: Cluster) -> Component:
    conf = kubeconfig_path("controller-manager")
    return Component(
        "kube-controller-manager",
        "Kubernetes controller manager",
        (
            "--allocate-node-cidrs=true",
            f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}",
            "--bind-address=127.0.0.1",
            f"--cluster-cidr={cluster.cluster_cidr}",
            f"--kubeconfig={conf}",
            "--leader-elect=false",
            f"--node-cidr-mask-size={cluster.node_cidr_prefix}",
            f"--root-ca-file={PKI_DIR}/ca.crt",
            f"--service-account-private-key-file={PKI_DIR}/sa.key",
            f"--service-cluster-ip-range={cluster.service_cidr}",
            "--use-service-account-credentials=true",
        ),
        after=("kube-apiserver.service",),
    )


def scheduler(cluster: Cluster) -> Component:
    conf = kubeconfig_path("scheduler")
    return Component(
        "kube-scheduler",
        "Kubernetes scheduler",
        (
            f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}",
            "--bind-address=127.0.0.1",
            f"--kubeconfig={conf}",
            "--leader-elect=false",
        ),
        after=("kube-apiserver.service",),
    )


def kubelet(cluster: Cluster, node_name: str, policy: KubeletPolicy | None = None) -> Component:
    """The kubelet, with its boot guard before it; `policy` gives the guard the strictly reserved CPUs."""
    node = cluster.node(node_name)
    return Component(
        "kubelet",
        "Kubernetes node agent",
        (
            f"--config={KUBELET_CONFIG}",
            f"--hostname-override={node.name}",
            f"--kubeconfig={kubeconfig_path('kubelet')}",
            f"--node-ip={node.address}",
        ),
        after=("network-online.target", "containerd.service"),
        pre_start=(kubelet_guard_command(policy),),
    )


def kubelet_guard_command(policy: KubeletPolicy | None = None) -> str:
    """The guard compares the CPU checkpoint with the online CPUs less the reserved ones under
    strict-cpu-reservation, as the kubelet does; everything else it reads from the node."""
    command = f"{GUARD_PYTHON} {KUBELET_GUARD}"
    reservations = checkpoint_reservations(policy) if policy is not None else {}
    if reservations.get("strict_cpu_reservation"):
        command += f" --strict-reserved-cpus={format_cpulist(reservations['reserved_cpus'])}"
    return command


def kube_proxy(cluster: Cluster, node_name: str) -> Component:
    """kube-proxy on a node that runs pods; everything but the config file is in KubeProxyConfiguration."""
    cluster.node(node_name)  # refuses a host that runs no pods
    return Component(
        "kube-proxy",
        "Kubernetes network proxy (Services)",
        (f"--config={KUBE_PROXY_CONFIG}",),
    )


def kube_proxy_configuration(cluster: Cluster, node_name: str) -> dict[str, Any]:
    """KubeProxyConfiguration in iptables mode.

    iptables: the guests already carry iptables (nf_tables backend on Debian 13) and conntrack, and it
    is still kube-proxy's default; nftables mode would add the `nft` tool to every image for no gain at
    the lab's scale (a handful of Services). clusterCIDR makes traffic from outside the pod range
    masqueraded; nodePortAddresses `primary` keeps NodePorts off loopback (no route_localnet change);
    conntrack.maxPerCore 0 leaves the kernel's conntrack limits as the host has them.
    """
    node = cluster.node(node_name)
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "bindAddress": str(node.address),
        "clientConnection": {"kubeconfig": kubeconfig_path("kube-proxy")},
        "clusterCIDR": str(cluster.cluster_cidr),
        "conntrack": {"maxPerCore": 0},
        "healthzBindAddress": f"{node.address}:10256",
        "hostnameOverride": node.name,
        "metricsBindAddress": "127.0.0.1:10249",
        "mode": "iptables",
        "nodePortAddresses": ["primary"],
    }


def etcd_environment(cluster: Cluster) -> dict[str, str]:
    """Debian's etcd.service reads /etc/default/etcd: one member on the server's loopback, plain http."""
    name = cluster.server.name
    return {
        "ETCD_NAME": name,
        "ETCD_DATA_DIR": "/var/lib/etcd/numa-lab",
        "ETCD_LISTEN_CLIENT_URLS": "http://127.0.0.1:2379",
        "ETCD_ADVERTISE_CLIENT_URLS": "http://127.0.0.1:2379",
        "ETCD_LISTEN_PEER_URLS": "http://127.0.0.1:2380",
        "ETCD_INITIAL_ADVERTISE_PEER_URLS": "http://127.0.0.1:2380",
        "ETCD_INITIAL_CLUSTER": f"{name}=http://127.0.0.1:2380",
        "ETCD_INITIAL_CLUSTER_STATE": "new",
    }


def kubelet_configuration(cluster: Cluster, managers: Mapping[str, Any]) -> dict[str, Any]:
    """The KubeletConfiguration of a node: its CPU/Memory/Topology Manager part (from the kubelet policy)
    over what every numa-lab node shares (x509 + webhook auth, systemd cgroups, containerd, TLS files,
    the cluster DNS address its pods resolve through)."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": f"{PKI_DIR}/ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "systemd",
        "clusterDNS": [str(cluster.dns_service_ip)],
        "clusterDomain": CLUSTER_DOMAIN,
        "containerRuntimeEndpoint": CONTAINERD_SOCKET,
        "resolvConf": "/etc/resolv.conf",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "tlsCertFile": f"{KUBELET_PKI_DIR}/kubelet.crt",
        "tlsPrivateKeyFile": f"{KUBELET_PKI_DIR}/kubelet.key",
    }
    return {**config, **managers}


def cni_conflist(cluster: Cluster, node_name: str) -> dict[str, Any]:
    """A bridge on the node's pod CIDR with host-local IPAM; other nodes' pods are reached by plain routes."""
    subnet = cluster.pod_cidr(node_name)
    return {
        "cniVersion": "1.0.0",
        "name": "numa-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet), "gateway": str(subnet.network_address + 1)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
