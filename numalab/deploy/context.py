"""The cluster a deploy works on, read once from the pyinfra inventory, and the host data keys it uses.

Every stage asks here instead of reading host data itself, so the keys and their defaults are in one
place (documented in inventories/README.md). Lab guests get their names and addresses from the lab's
host data; bare-metal hosts from `k8s_node_name` / `k8s_address`, else pyinfra's name and ssh_hostname.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pyinfra.api.exceptions import DeployError
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory

from numalab.deploy.facts import Virtualization
from numalab.model import components
from numalab.model.cluster import (
    DISTRIBUTIONS,
    NUMA_ALIGN_INSTALLS,
    RKE2_KEYS,
    Cluster,
    choose_distribution,
    cluster_from_groups,
)
from numalab.model.cluster_keys import CLUSTER_KEYS, NODE_KEYS
from numalab.model.errors import ValidationError
from numalab.model.node_reset import EMPTYDIR_KEY, FORCE_KEY, DrainOptions
from numalab.model.rke2_install import Rke2Install, rke2_install_from_data
from numalab.progress import say

T = TypeVar("T")
CLUSTER_GROUPS = ("registry", "rke2_servers", "rke2_agents")
DEFAULTS: dict[str, Any] = {
    **CLUSTER_KEYS,  # checked for agreement between hosts (numalab.model.cluster_keys), as NODE_KEYS are
    **NODE_KEYS,
    "k8s_server_runs_pods": False,
    "k8s_node_ready_timeout": 600,
    "drain_force": False,  # a policy-change reset's drain evicts pods no controller owns (kubectl drain --force)
    "drain_delete_emptydir_data": False,  # ... and pods with emptyDir data (kubectl drain --delete-emptydir-data)
    "kubelet_settings": {},  # numalab.model.kubelet settings (policies, reservations)
    "numa_scheduler": None,  # the NUMA-aware second scheduler (None: on in an upstream lab, off elsewhere)
    "numa_metrics": None,  # Prometheus on the registry host scrapes numa-align (None: on in an upstream lab)
    "kubelet_allow_newer": False,  # apply the newest known kubelet's rules to a newer kubelet
    "go_max_procs": None,  # GOMAXPROCS of the Go daemons numa-lab runs (None: 1 on a host emulated in software)
}


def data(host: Host, key: str) -> Any:
    """A numa-lab host data key, or its default."""
    value = host.data.get(key)
    return DEFAULTS[key] if value is None else value


def once(host: Host, key: str, compute: Callable[[], T]) -> T:
    """compute() once per host and run: what several stages read of a host while they are planned (before
    any operation runs, so a second read could only repeat the first, at 2-3 s a fact on an emulated guest)."""
    real = host._get_module() if hasattr(host, "_get_module") else host  # pyinfra's `host` is a context proxy
    cache = real.__dict__.setdefault("_numalab_once", {})
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def drain_options(host: Host) -> DrainOptions:
    """What this node's drain may evict beyond pods a controller re-creates (drain_force,
    drain_delete_emptydir_data); refused, naming the key, unless true or false."""
    values = {key: data(host, key) for key in (FORCE_KEY, EMPTYDIR_KEY)}
    for key, value in values.items():
        if not isinstance(value, bool):
            raise DeployError(f"{host.name}: {key} is {value!r}; expected true or false")
    return DrainOptions(force=values[FORCE_KEY], delete_emptydir_data=values[EMPTYDIR_KEY])


def go_environment(host: Host) -> dict[str, str]:
    """The environment numa-lab's Go daemons on this host run with (GOMAXPROCS; see go_max_procs), asked of
    the host once per run."""
    setting = host.data.get("go_max_procs")
    virtualization = once(host, "virtualization", lambda: host.get_fact(Virtualization)) if setting is None else ""
    try:
        return components.go_environment(components.go_max_procs(setting, virtualization))
    except ValidationError as exc:
        raise DeployError(f"{host.name}: {exc}") from None


def node_name(host: Host) -> str:
    return host.data.get("k8s_node_name") or host.data.get("kvm_guest") or host.name


def node_address(host: Host) -> str:
    return host.data.get("k8s_address") or host.data.get("lab_address") or host.data.get("ssh_hostname") or host.name


def state_dir(host: Host) -> Path:
    explicit = data(host, "k8s_state_dir")
    if explicit:
        return Path(explicit).expanduser()
    lab = host.data.get("kvm_lab")
    if lab:
        return Path(lab["settings"]["state_dir"]).expanduser()
    raise DeployError(f"{host.name}: set k8s_state_dir (where the cluster's keys and kubeconfig live on this machine)")


def cluster_name(host: Host) -> str:
    return host.data.get("lab_name") or host.data.get("k8s_cluster_name") or "numa-lab"


def cluster_of(host: Host) -> Cluster:
    return _cluster(host.inventory, cluster_name(host))


@functools.lru_cache(maxsize=4)
def _cluster(inventory: Inventory, name: str) -> Cluster:
    groups = {
        group: [(node_name(h), node_address(h), h.data.dict()) for h in inventory.get_group(group, [])]
        for group in CLUSTER_GROUPS
    }
    try:
        return cluster_from_groups(name, groups)
    except ValidationError as exc:
        raise DeployError(f"inventory: {exc}") from None


def role_of(host: Host) -> set[str]:
    return {group for group in CLUSTER_GROUPS if host in host.inventory.get_group(group, [])}


def runs_pods(host: Host) -> bool:
    return node_name(host) in cluster_of(host).node_names


def check_choice(host: Host, key: str, choices: tuple[str, ...]) -> str:
    value = data(host, key)
    if value not in choices:
        raise DeployError(f"{host.name}: {key} is {value!r}; expected one of {', '.join(choices)}")
    return value


def distribution(host: Host) -> str:
    return check_choice(host, "k8s_distribution", DISTRIBUTIONS)


def numa_align_install(host: Host) -> str:
    return check_choice(host, "numa_align_install", NUMA_ALIGN_INSTALLS)


def publishes_nrt(host: Host) -> bool:
    """numa_align_nrt, by default on wherever numa-align has credentials to publish with: its DaemonSet's
    ServiceAccount, or under the upstream distribution the client certificate numa-lab's PKI issues its unit.
    An RKE2 node running the unit has neither (RKE2's CA is not numa-lab's): off unless asked, refused if asked."""
    value = data(host, "numa_align_nrt")
    if value is not None and not isinstance(value, bool):
        raise DeployError(f"{host.name}: numa_align_nrt is {value!r}; expected true or false")
    credentials = numa_align_install(host) == "daemonset" or chosen_distribution(host)[0] == "upstream"
    if value and not credentials:
        raise DeployError(f"{host.name}: numa_align_nrt is true, but numa-align's systemd unit has no credentials "
                          "on RKE2: set numa_align_install: daemonset (its ServiceAccount publishes) or "
                          "numa_align_nrt: false")
    return credentials if value is None else value


def runs_numa_scheduler(host: Host) -> bool:
    """numa_scheduler: the NUMA-aware scheduler beside kube-scheduler; by default on in the lab under the
    upstream distribution. Upstream only: RKE2 runs its own control plane and numa-lab does not add to it."""
    value = data(host, "numa_scheduler")
    if value is not None and not isinstance(value, bool):
        raise DeployError(f"{host.name}: numa_scheduler is {value!r}; expected true or false")
    upstream = chosen_distribution(host)[0] == "upstream"
    if value and not upstream:
        raise DeployError(f"{host.name}: numa_scheduler runs beside the upstream control plane only; "
                          "set numa_scheduler: false for RKE2")
    runs = (upstream and host.data.get("kvm_lab") is not None) if value is None else value
    if runs and not publishes_nrt(host):
        raise DeployError(f"{host.name}: numa_scheduler needs NodeResourceTopology objects: numa_align_nrt is off")
    return runs


def runs_metrics(host: Host) -> bool:
    """numa_metrics: Debian's prometheus on the registry host scraping every node's numa-align; by default on
    in the lab (its image carries the package) under the upstream distribution, off elsewhere (a bare-metal
    registry host may not have Prometheus, or run one of its own)."""
    value = data(host, "numa_metrics")
    if value is not None and not isinstance(value, bool):
        raise DeployError(f"{host.name}: numa_metrics is {value!r}; expected true or false")
    if value is None:
        return chosen_distribution(host)[0] == "upstream" and host.data.get("kvm_lab") is not None
    return value


def chosen_distribution(host: Host) -> tuple[str, str]:
    """(distribution, why) for this host's data: see numalab.model.cluster.choose_distribution."""
    try:
        return choose_distribution(data(host, "k8s_distribution"), [k for k in RKE2_KEYS if host.data.get(k)])
    except ValidationError as exc:
        raise DeployError(f"{host.name}: {exc}") from None


@functools.lru_cache(maxsize=1)
def _announce(choice: str, why: str) -> None:
    say(f"Kubernetes distribution: {choice} ({why})")


def announce_distribution(host: Host) -> str:
    choice, why = chosen_distribution(host)
    _announce(choice, why)
    return choice


def rke2_install(host: Host) -> Rke2Install:
    """How RKE2 gets onto this host (rke2_install, rke2_version, ...), checked; errors name the host and key."""
    try:
        return rke2_install_from_data(host.data.dict(), where=host.name)
    except ValidationError as exc:
        raise DeployError(str(exc)) from None
