"""Stage `node` (every host that runs pods): containerd with the lab registry, CNI on the node's pod CIDR,
and the kubelet whose CPU, Memory and Topology Managers come from numalab.model.kubelet, computed from
the host's own NUMA topology (a fact) for the kubelet version the binaries report."""

from __future__ import annotations

import json
from io import StringIO

import yaml
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import files, python, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import api, context, controller, policy_reset
from numalab.deploy.checkpoints import put_guard, reset_files
from numalab.deploy.cni_state import boot_scoped_cni_state
from numalab.deploy.control_plane import put_binary, put_unit
from numalab.deploy.facts import TextFile
from numalab.deploy.operations import secret_file
from numalab.deploy.policy import node_policy
from numalab.deploy.routes import pod_routes
from numalab.deploy.services import running_and_current
from numalab.images.lab_images import PAUSE_REPOSITORY, lab_images
from numalab.model import components
from numalab.model.cluster import Cluster
from numalab.model.components import CONTAINERD_DROPIN, KUBELET_CONFIG, KUBELET_PKI_DIR
from numalab.model.kubelet import KubeletPolicy, kubelet_configuration
from numalab.render import render


def kubelet_config_text(cluster: Cluster, policy: KubeletPolicy) -> str:
    """The node's KubeletConfiguration: the policy's managers over what every numa-lab node shares."""
    config = components.kubelet_configuration(cluster, kubelet_configuration(policy))
    return yaml.safe_dump(config, sort_keys=False)


def sandbox_image(registry: str | None) -> str:
    pause = next(image for image in lab_images(controller.binaries(host).version)
                 if image.repository == PAUSE_REPOSITORY)
    if registry is None:
        raise DeployError("no registry host: the lab's pause image is served by the `registry` group")
    return f"{registry}/{pause.name}"


def planned_reset() -> list[str]:
    """The state files this host's node stage will remove (none: it needs no turn): those a policy change
    makes stale and those that no longer match the machine (said with their reasons as they are found)."""
    policy = node_policy()
    config_text = kubelet_config_text(context.cluster_of(host), policy)
    stale = policy_reset.plan(host.get_fact(TextFile, path=KUBELET_CONFIG), config_text)
    return reset_files(stale, policy)


@deploy("node")
def node(reset: list[str]) -> None:
    """containerd, CNI and routes, the kubelet with the computed policy; waits until the node is Ready.
    `reset`: the state files planned_reset() found stale, planned once for the turns and for this stage."""
    cluster = context.cluster_of(host)
    name = context.node_name(host)
    pki = controller.pki(host)
    kubeconfig = context.state_dir(host) / "kubeconfig"

    policy = node_policy()
    config_text = kubelet_config_text(cluster, policy)

    registry = cluster.registry_endpoint
    containerd_files = [
        files.put(name="containerd config (CRI, systemd cgroups, registry mirror)",
                  src=StringIO(render("k8s/containerd-config.toml.j2", sandbox_image=sandbox_image(registry),
                                      cni_bin_dir=components.CNI_BIN_DIR,
                                      certs_dir=components.CONTAINERD_CERTS_DIR)),
                  dest=components.CONTAINERD_CONFIG, mode="644"),
        files.put(name=f"containerd trusts the cluster CA for {registry}",
                  src=StringIO(render("k8s/hosts.toml.j2", endpoint=registry, ca_file=components.CLUSTER_CA)),
                  dest=f"{components.CONTAINERD_CERTS_DIR}/{registry}/hosts.toml", mode="644",
                  create_remote_dir=True),
    ]
    go_environment = context.go_environment(host)
    if go_environment:
        dropin = files.put(name="containerd's Go environment", dest=CONTAINERD_DROPIN, mode="644",
                           src=StringIO(render("k8s/go-environment.conf.j2", environment=go_environment)),
                           create_remote_dir=True)
    else:
        dropin = files.file(name="No Go environment for containerd", path=CONTAINERD_DROPIN, present=False)
    systemd.daemon_reload(name="Reload systemd for containerd", _if=any_changed(dropin))
    containerd_files.append(dropin)
    boot_scoped_cni_state()  # before containerd gives any sandbox an address
    running_and_current("containerd", "containerd enabled and running", "Restart containerd for its new config",
                        containerd_files)

    files.put(name="CNI: bridge and host-local on this node's pod CIDR",
              src=StringIO(json.dumps(components.cni_conflist(cluster, name), indent=2) + "\n"),
              dest=components.CNI_CONF, mode="644", create_remote_dir=True)
    pod_routes(cluster, name)

    files.directory(name="Kubelet PKI dir", path=KUBELET_PKI_DIR, mode="700")
    node_pki = f"nodes/{name}"
    credentials = [
        files.put(name="Kubelet serving certificate", src=StringIO(pki.read(f"{node_pki}/kubelet.crt").decode()),
                  dest=f"{KUBELET_PKI_DIR}/kubelet.crt", mode="644"),
        secret_file(name="Kubelet serving key", content=pki.read(f"{node_pki}/kubelet.key"),
                    dest=f"{KUBELET_PKI_DIR}/kubelet.key"),
        secret_file(name="Kubelet kubeconfig", content=pki.read(f"{node_pki}/kubelet.conf"),
                    dest=components.kubeconfig_path("kubelet")),
    ]

    pod_cidr = str(cluster.pod_cidr(name))
    existing = api.read_node(kubeconfig, name)
    if existing is None or existing.spec.pod_cidr != pod_cidr:
        python.call(name=f"Node object {name} with podCIDR {pod_cidr}", function=api.ensure_node,
                    kubeconfig=kubeconfig, node=name, pod_cidr=pod_cidr)

    policy_reset.before_config(reset, kubeconfig, name)
    kubelet_config = files.put(name="KubeletConfiguration (CPU, Memory and Topology Managers)",
                               src=StringIO(config_text), dest=KUBELET_CONFIG, mode="644", create_remote_dir=True)
    component = components.kubelet(cluster, name, policy)
    put_guard()  # before the unit whose ExecStartPre runs it
    binary = put_binary("kubelet")
    unit = put_unit(component)
    systemd.daemon_reload(name="Reload systemd for the kubelet", _if=any_changed(unit))
    changed = [binary, unit, kubelet_config, *credentials, *containerd_files]
    running_and_current("kubelet", "kubelet enabled and running",
                        "Restart the kubelet for its new binary, config or credentials", changed)

    timeout = float(context.data(host, "k8s_node_ready_timeout"))
    if not api.node_is_ready(existing) or reset:
        python.call(name=f"Wait until node {name} is Ready", function=api.wait_node_ready,
                    kubeconfig=kubeconfig, node=name, timeout=timeout)
    else:
        python.call(name=f"Wait until node {name} is Ready again", function=api.wait_node_ready,
                    kubeconfig=kubeconfig, node=name, timeout=timeout, _if=any_changed(*changed))
    policy_reset.after_ready(reset, kubeconfig, name)
