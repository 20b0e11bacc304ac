"""Which leaf certificates and kubeconfigs a cluster gets, and what each must say. No I/O, no crypto.

Names follow kubeadm (`apiserver`, `apiserver-kubelet-client`, `admin.conf`); a profile's name is its
path stem under the PKI directory, so per-node material sits in `nodes/<node>/` and can be uploaded as a set.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from numalab.pki.spec import PkiSpec

SERVER = "server"  # extendedKeyUsage serverAuth
CLIENT = "client"  # extendedKeyUsage clientAuth
MASTERS = "system:masters"
NODES = "system:nodes"
ADMIN_USER = "numa-lab-admin"
# kube-proxy's user: the apiserver's bootstrap ClusterRoleBinding system:node-proxier grants it what it reads.
KUBE_PROXY_USER = "system:kube-proxy"
# numa-align's user under its systemd unit (the DaemonSet uses its ServiceAccount): bound by numa-lab to read
# its Node and write NodeResourceTopology objects, nothing else.
NUMA_ALIGN_USER = "numa-lab:numa-align"
# The NUMA-aware scheduler's user (numalab.model.numa_scheduler): kube-scheduler's roles, NRT reads, its Lease.
NUMA_SCHEDULER_USER = "numa-lab:numa-scheduler"
# The API server's identity towards kubelets. system:masters, as kubeadm before 1.29 had it: it needs no
# ClusterRoleBinding (a narrower group would need one to system:kubelet-api-admin before the first `kubectl logs`).
APISERVER_KUBELET_CLIENT_GROUP = MASTERS
LOOPBACK_URL = "https://127.0.0.1:6443"


@dataclass(frozen=True)
class LeafProfile:
    """One leaf certificate: `name` is its path stem (`<name>.crt`, `<name>.key`)."""

    name: str
    common_name: str
    usage: str  # SERVER or CLIENT
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[ipaddress.IPv4Address, ...] = ()


@dataclass(frozen=True)
class KubeconfigProfile:
    """One kubeconfig file `name`, carrying the leaf `credential` and pointing at `server_url`."""

    name: str
    credential: str
    server_url: str
    user: str


def node_dir(node: str) -> str:
    return f"nodes/{node}"


def leaf_profiles(spec: PkiSpec) -> tuple[LeafProfile, ...]:
    """Every leaf certificate of the cluster, control plane first, then two per node."""
    server = spec.server
    loopback = ipaddress.IPv4Address("127.0.0.1")
    profiles = []
    if spec.registry is not None:
        profiles.append(
            LeafProfile("registry", spec.registry.name, SERVER, (), (spec.registry.name,), (spec.registry.address,))
        )
    api_dns = (
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        server.name,
        "localhost",
    )
    api_ips = tuple(dict.fromkeys((server.address, spec.service_ip, loopback)))
    profiles += [
        LeafProfile("apiserver", "kube-apiserver", SERVER, (), tuple(dict.fromkeys(api_dns)), api_ips),
        LeafProfile(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", CLIENT, (APISERVER_KUBELET_CLIENT_GROUP,)
        ),
        LeafProfile("admin", ADMIN_USER, CLIENT, (MASTERS,)),
        LeafProfile("controller-manager", "system:kube-controller-manager", CLIENT),
        LeafProfile("scheduler", "system:kube-scheduler", CLIENT),
        LeafProfile("kube-proxy", KUBE_PROXY_USER, CLIENT),
        LeafProfile("numa-align", NUMA_ALIGN_USER, CLIENT),
        LeafProfile("numa-scheduler", NUMA_SCHEDULER_USER, CLIENT),
    ]
    for node in spec.nodes:
        identity = f"system:node:{node.name}"
        profiles += [
            LeafProfile(f"{node_dir(node.name)}/kubelet-client", identity, CLIENT, (NODES,)),
            LeafProfile(f"{node_dir(node.name)}/kubelet", identity, SERVER, (NODES,), (node.name,), (node.address,)),
        ]
    return tuple(profiles)


def kubeconfig_profiles(spec: PkiSpec) -> tuple[KubeconfigProfile, ...]:
    """The admin's (URL the controller reaches), the control-plane components' (loopback), kube-proxy's and
    numa-align's (one for every node: neither is a node's own identity) and each kubelet's."""
    profiles = [
        KubeconfigProfile("admin.conf", "admin", spec.admin_url, ADMIN_USER),
        KubeconfigProfile(
            "controller-manager.conf", "controller-manager", LOOPBACK_URL, "system:kube-controller-manager"
        ),
        KubeconfigProfile("scheduler.conf", "scheduler", LOOPBACK_URL, "system:kube-scheduler"),
        KubeconfigProfile("numa-scheduler.conf", "numa-scheduler", LOOPBACK_URL, NUMA_SCHEDULER_USER),
        KubeconfigProfile("kube-proxy.conf", "kube-proxy", spec.server_url, KUBE_PROXY_USER),
        KubeconfigProfile("numa-align.conf", "numa-align", spec.server_url, NUMA_ALIGN_USER),
    ]
    for node in spec.nodes:
        profiles.append(
            KubeconfigProfile(
                f"{node_dir(node.name)}/kubelet.conf",
                f"{node_dir(node.name)}/kubelet-client",
                spec.server_url,
                f"system:node:{node.name}",
            )
        )
    return tuple(profiles)
