"""What the deploy prepares on the controller, once per run whatever the number of hosts: the cluster's
PKI, the Kubernetes binaries, and the numa-align wheelhouse. Each is cached by its inputs, so every
host's stage asks here and the work is done on the first ask."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from pyinfra.api.exceptions import DeployError
from pyinfra.api.host import Host

from numalab.deploy import context
from numalab.k8s.binaries import Binaries, resolve_binaries
from numalab.k8s.cache import default_cache_root
from numalab.k8s.errors import BinariesError
from numalab.k8s.versions import KUBERNETES_VERSION
from numalab.model.cluster import Cluster
from numalab.pki import ClusterPki, PkiSpec, ensure_pki
from numalab.pki import Host as PkiHost
from numalab.progress import say
from numalab.rke2.token import ensure_token

# pyinfra prepares hosts concurrently (greenlets): the first ask does the work, the others wait for it.
_LOCK = threading.Lock()


def pki_spec(cluster: Cluster) -> PkiSpec:
    return PkiSpec(
        cluster=cluster.name,
        server=PkiHost(cluster.server.name, cluster.server.address),
        nodes=tuple(PkiHost(node.name, node.address) for node in cluster.nodes),
        registry=PkiHost(cluster.registry.name, cluster.registry.address) if cluster.registry else None,
        service_cidr=str(cluster.service_cidr),
    )


def pki(host: Host) -> ClusterPki:
    """The cluster's certificates, keys and kubeconfigs (0600 under <state dir>/pki, never printed).

    With RKE2 the admin kubeconfig is the one RKE2's server writes (fetched by the rke2_service stage);
    the CA still signs the lab registry's certificate."""
    upstream = context.chosen_distribution(host)[0] == "upstream"
    with _LOCK:
        return _pki(context.cluster_of(host), context.state_dir(host), upstream)


@functools.lru_cache(maxsize=4)
def _pki(cluster: Cluster, state_dir: Path, admin_kubeconfig: bool) -> ClusterPki:
    kubeconfig = state_dir / "kubeconfig" if admin_kubeconfig else None
    result = ensure_pki(pki_spec(cluster), state_dir / "pki", admin_kubeconfig=kubeconfig)
    if result.changed:
        say(f"cluster PKI in {result.directory}: wrote {len(result.changed)} files")
    return result


def binaries_spec(host: Host) -> str:
    return context.data(host, "k8s_binaries") or f"go:{KUBERNETES_VERSION}"


def binaries(host: Host) -> Binaries:
    """kubelet, kube-apiserver, kube-controller-manager, kube-scheduler: resolved (built, if need be) once."""
    with _LOCK:
        return _binaries(binaries_spec(host), binaries_cache_root(host))


def binaries_cache_root(host: Host) -> Path:
    """Where built binaries are cached: the lab's image dir, else numa-lab's cache (numalab.k8s.cache)."""
    cache = host.data.get("kvm_lab", {}).get("settings", {}).get("image_dir")
    return Path(cache).expanduser() / "k8s" if cache else default_cache_root(os.environ)


@functools.lru_cache(maxsize=4)
def _binaries(spec: str, cache_root: Path) -> Binaries:
    try:
        found = resolve_binaries(spec, cache_root)
    except BinariesError as exc:
        raise DeployError(f"k8s_binaries: {exc}") from None
    say(f"Kubernetes {found.version} binaries from {found.source}: {found.directory}")
    return found


def rke2_token(host: Host) -> str:
    """The RKE2 join token (0600 in the state dir); only ever written to nodes by secret_file."""
    with _LOCK:
        try:
            return ensure_token(context.state_dir(host))
        except ValueError as exc:
            raise DeployError(str(exc)) from None
