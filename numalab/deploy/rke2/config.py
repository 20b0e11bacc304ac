"""Stage `rke2_config`: /etc/rancher/rke2/config.yaml (join settings, holds the token: written as a secret,
0600), the kubelet policy computed from the node's topology fact as kubelet-arg+ in
config.yaml.d/50-numa-lab.yaml, and registries.yaml pointing at the lab registry with the cluster CA. A user's
config file that sets one of the drop-in's kubelet flags is refused first (numalab.model.rke2_merge).

A changed CPU or Memory Manager policy (or its reservations under static) plans the policy-change reset:
rke2-server / rke2-agent is stopped and the stale checkpoint files removed before the drop-in changes.
On a node that runs pods the kubelet boot guard (numalab.checkpoint_guard) runs before the service, from a
systemd drop-in, as it runs before upstream's kubelet unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import files, systemd

from numalab.deploy import context, controller, policy_reset
from numalab.deploy.checkpoints import put_guard, reset_files
from numalab.deploy.facts import TextFile
from numalab.deploy.operations import secret_file
from numalab.deploy.policy import node_policy
from numalab.deploy.rke2.facts import Rke2KubeletArgs
from numalab.model.components import CLUSTER_CA, kubelet_guard_command
from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletPolicy
from numalab.model.rke2 import registries_config
from numalab.model.rke2 import rke2_config as rke2_config_model
from numalab.model.rke2_merge import check_user_kubelet_args
from numalab.render import render

CONFIG_DIR = "/etc/rancher/rke2"
CONFIG = f"{CONFIG_DIR}/config.yaml"
DROPIN = f"{CONFIG_DIR}/config.yaml.d/50-numa-lab.yaml"
REGISTRIES = f"{CONFIG_DIR}/registries.yaml"
SERVER_ONLY_TAINT = "CriticalAddonsOnly=true:NoExecute"  # RKE2's advice for servers that run no workloads


@dataclass
class Rke2Files:
    """What the service stage needs: the operations whose change means a restart, and the reset plan."""

    service: str
    changed: list[Any]
    stale: list[str]


def service_of(host_roles: set[str]) -> str:
    return "rke2-server" if "rke2_servers" in host_roles else "rke2-agent"


def config_text(role: str, token: str, policy_free: bool) -> str:
    cluster = context.cluster_of(host)
    name = context.node_name(host)
    registry = cluster.registry_endpoint
    try:
        config = rke2_config_model(
            "server" if role == "rke2-server" else "agent",
            token=token,
            server=None if role == "rke2-server" else str(cluster.server.address),
            tls_san=(str(cluster.server.address), cluster.server.name) if role == "rke2-server" else (),
            node_taints=(SERVER_ONLY_TAINT,) if policy_free and role == "rke2-server" else (),
            node_ip=context.node_address(host),
            node_name=name,
            system_default_registry=registry if context.data(host, "rke2_registry_airgap") else None,
            where=f"{name}: rke2",
        )
    except ValidationError as exc:
        raise DeployError(str(exc)) from None
    return render("rke2/config.yaml.j2", **config.template_values())


def kubelet_args_text(policy: KubeletPolicy) -> str:
    summary = (f"cpu {policy.cpu_manager_policy}, memory {policy.memory_manager_policy}, "
               f"topology {policy.topology_manager_policy}, kubelet {policy.kubelet_version}")
    return render("rke2/kubelet-args.yaml.j2", kubelet_args=list(policy.args), summary=summary)


def guard_dropin(service: str, policy: KubeletPolicy) -> tuple[str, str]:
    """The systemd drop-in that runs numa-lab's kubelet boot guard before rke2-server / rke2-agent, whose
    kubelet keeps its checkpoints in /var/lib/kubelet as upstream's does; the guard looks for live containers
    in RKE2's containerd (/run/k3s/containerd) too. Only a drop-in: it takes effect at the next start (a
    boot), so writing it restarts nothing."""
    return (f"/etc/systemd/system/{service}.service.d/10-numa-lab-kubelet-guard.conf",
            f"[Service]\nExecStartPre=-{kubelet_guard_command(policy)}\n")


def planned_reset() -> list[str]:
    """The state files this node's rke2_config will remove for a policy change or because they no longer
    match the machine (none: it needs no turn). RKE2's kubelet keeps them in /var/lib/kubelet too."""
    policy = node_policy()
    return reset_files(policy_reset.plan(host.get_fact(TextFile, path=DROPIN), kubelet_args_text(policy)), policy)


@deploy("rke2_config")
def rke2_config(reset: list[str] | None = None) -> Rke2Files:
    """Write the three files; returns what changed for the service stage. `reset`: the state files
    planned_reset() found stale, when the node's turn was planned on them; planned here otherwise."""
    service = service_of(context.role_of(host))
    runs_pods = context.runs_pods(host)
    if runs_pods:
        refuse_user_kubelet_args()
    token = controller.rke2_token(host)
    files.directory(name="RKE2 config dirs", path=f"{CONFIG_DIR}/config.yaml.d", mode="755")
    changed = [
        secret_file(name="RKE2 config.yaml (server URL, join token, node address)",
                    content=config_text(service, token, not runs_pods).encode(), dest=CONFIG),
    ]
    stale: list[str] = []
    if runs_pods:
        policy = node_policy()
        new = kubelet_args_text(policy)
        stale = reset_files(policy_reset.plan(host.get_fact(TextFile, path=DROPIN), new), policy) \
            if reset is None else reset
        policy_reset.before_config(stale, kubeconfig(), context.node_name(host), service=service)
        changed.append(files.put(name="Kubelet policy drop-in (kubelet-arg+, computed from this node's topology)",
                                 src=StringIO(new), dest=DROPIN, mode="644"))
        put_guard()  # RKE2 starts its kubelet itself: the guard runs before the service instead
        path, text = guard_dropin(service, policy)
        guarded = files.put(name=f"{service} runs the kubelet boot guard first (ExecStartPre)", src=StringIO(text),
                            dest=path, mode="644", create_remote_dir=True)
        systemd.daemon_reload(name=f"Reload systemd for {service}'s guard drop-in", _if=guarded.did_change)
    registry = context.cluster_of(host).registry_endpoint
    if registry:
        values = registries_config(registry, mirror_docker_io=False, scheme="https", ca_file=CLUSTER_CA)
        changed.append(files.put(name=f"RKE2 registries.yaml: {registry} with the cluster CA",
                                 src=StringIO(render("rke2/registries.yaml.j2", **values)), dest=REGISTRIES,
                                 mode="644"))
    return Rke2Files(service, changed, stale)


def refuse_user_kubelet_args() -> None:
    """Before anything is written: a user's kubelet-arg for a flag the drop-in sets would add to it or mix into it
    (numalab.model.rke2_merge), so the policy the node gets would not be the one computed and checked."""
    try:
        check_user_kubelet_args(host.get_fact(Rke2KubeletArgs, config_dir=CONFIG_DIR), own=DROPIN)
    except ValidationError as exc:
        raise DeployError(f"{host.name}: {exc}") from None


def kubeconfig() -> Path:
    return context.state_dir(host) / "kubeconfig"
