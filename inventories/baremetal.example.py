"""Bare-metal RKE2 inventory: copy it, set your hosts and data, then

    pyinfra inventories/baremetal.py deploys/cluster.py --dry   # the plan, nothing changed
    pyinfra inventories/baremetal.py deploys/cluster.py

Hosts are SSH targets (names from your ~/.ssh/config, or addresses), each with the IPv4 address the
cluster uses (`k8s_address`); the pyinfra name is also the node name. This example reads them from the
environment as NAME=ADDRESS entries so it runs as it is: RKE2_SERVERS (exactly one), RKE2_AGENTS
(comma-separated), RKE2_REGISTRY (optional). Any data key below can also be overridden on the command line:
`--data rke2_install=online`.
Every data key the stages read is listed in inventories/README.md ("Host data"); the ones an RKE2 user
sets are here, with their defaults where they have one.
"""

import os


def _hosts(variable: str, default: str) -> list[tuple[str, str]]:
    """NAME=ADDRESS,... from the environment."""
    entries = [entry.strip() for entry in os.environ.get(variable, default).split(",") if entry.strip()]
    return [tuple(entry.split("=", 1)) if "=" in entry else (entry, "") for entry in entries]


_SERVERS = _hosts("RKE2_SERVERS", "rke2-server-1=192.0.2.10")
_AGENTS = _hosts("RKE2_AGENTS", "rke2-agent-1=192.0.2.11,rke2-agent-2=192.0.2.12")
_REGISTRY = _hosts("RKE2_REGISTRY", "")

_CLUSTER = {
    # Which Kubernetes: rke2 here (auto also picks rke2 when rke2_* keys are set; upstream runs numa-lab's
    # own build of the Kubernetes binaries).
    "k8s_distribution": "rke2",
    # online: the node downloads the release tarball and its sha256 sums from rke2_release_url (GitHub's
    #         releases by default); airgap: rke2_artifacts_dir on this machine holds
    #         rke2.linux-amd64.tar.gz, rke2-images.linux-amd64.tar.zst (or .tar.gz) and sha256sum-amd64.txt,
    #         checked here and again on each node before anything is installed; preinstalled: RKE2 is
    #         already in /usr/local: config files and services only.
    "rke2_install": "airgap",
    "rke2_version": "v1.31.4+rke2r1",  # pinned; the kubelet policy is computed for its Kubernetes (v1.31.4)
    "rke2_artifacts_dir": "/srv/rke2-artifacts/v1.31.4+rke2r1",
    # "rke2_release_url": "https://github.com/rancher/rke2/releases/download",  # online only
    # "rke2_registry_airgap": True,  # RKE2's system images from the `registry` host (system-default-registry)
    # Controller-side state: pki/, rke2-token (0600, the join token), kubeconfig (0600, fetched from the server).
    "k8s_state_dir": os.path.expanduser("~/.local/share/numa-lab/baremetal"),
    "k8s_node_ready_timeout": 600,
    # The kubelet policy, computed from each node's real topology and checked before anything is written
    # (the README's kubelet-args table has every setting): policies, their options, and the reservations.
    # Reserved CPUs are whole CPUs from the lowest cell; reserved-memory, when not given, is split cell 0
    # first so that it adds up to kube-reserved + system-reserved + eviction-hard, as the kubelet demands.
    "kubelet_settings": {
        "cpu-manager-policy": "static",
        "memory-manager-policy": "Static",
        "topology-manager-policy": "single-numa-node",
        "topology-manager-scope": "pod",
        # "cpu-manager-policy-options": {"full-pcpus-only": "true"},
        # "kube-reserved": {"cpu": "500m", "memory": "512Mi"},    # the defaults
        # "system-reserved": {"cpu": "500m", "memory": "512Mi"},
        # "eviction-hard": {"memory.available": "100Mi"},         # merged over the kubelet's defaults
        # "reserved-cpus": "0-1",
        # "reserved-memory": [{"numa-node": 0, "memory": "1124Mi"}],
    },
    # numa-align: systemd (a venv in /opt/numa-align from a wheelhouse built here) or daemonset (with
    # numa_align_image); numa_align_settings sets the plugin's NUMA_* variables.
    "numa_align_install": "systemd",
    # "numa_align_settings": {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins"},
    "ssh_user": "root",
}

rke2_servers = [(name, {**_CLUSTER, "k8s_address": address, "k8s_server_runs_pods": False})
                for name, address in _SERVERS]
rke2_agents = [(name, {**_CLUSTER, "k8s_address": address}) for name, address in _AGENTS]
if _REGISTRY:
    registry = [(name, {**_CLUSTER, "k8s_address": address}) for name, address in _REGISTRY]
