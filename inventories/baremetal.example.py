"""Bare-metal RKE2 inventory: copy it, set your hosts and data, then

    pyinfra inventories/baremetal.py deploys/cluster.py --dry   # the plan, nothing changed
    pyinfra inventories/baremetal.py deploys/cluster.py

Hosts are SSH targets (names from your ~/.ssh/config, or addresses). This example reads them from the
environment so it runs as it is: RKE2_SERVERS (exactly one), RKE2_AGENTS (comma-separated), RKE2_REGISTRY
(optional). Any data key below can also be overridden on the command line: `--data rke2_install=online`.
Every data key the stages read is listed in inventories/README.md ("Host data"); the ones an RKE2 user
sets are here, with their defaults where they have one.
"""

import os

_SERVERS = [name for name in os.environ.get("RKE2_SERVERS", "rke2-server-1").split(",") if name]
_AGENTS = [name for name in os.environ.get("RKE2_AGENTS", "rke2-agent-1,rke2-agent-2").split(",") if name]
_REGISTRY = os.environ.get("RKE2_REGISTRY", "")

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
    # The kubelet policy, computed from each node's real topology (`numalab kubelet-args --help` lists
    # every setting): CPU Manager static, Memory Manager Static, Topology Manager single-numa-node/pod.
    "kubelet_settings": {
        "cpu-manager-policy": "static",
        "memory-manager-policy": "Static",
        "topology-manager-policy": "single-numa-node",
        "topology-manager-scope": "pod",
    },
    # numa-align: systemd (a venv in /opt/numa-align from a wheelhouse built here) or daemonset.
    "numa_align_install": "systemd",
    "ssh_user": "root",
}

rke2_servers = [(name, {**_CLUSTER, "k8s_server_runs_pods": False}) for name in _SERVERS]
rke2_agents = [(name, dict(_CLUSTER)) for name in _AGENTS]
if _REGISTRY:
    registry = [(_REGISTRY, dict(_CLUSTER))]
