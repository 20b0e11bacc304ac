"""Stage `control_plane` (group rke2_servers, distribution upstream): etcd, kube-apiserver,
kube-controller-manager and kube-scheduler as systemd units, from the resolved upstream binaries."""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import context, controller
from numalab.deploy.operations import secret_file, stamped_file
from numalab.deploy.routes import pod_routes
from numalab.deploy.services import running_and_current
from numalab.deploy.waiting import https_ok, wait_until
from numalab.model import components
from numalab.model.components import K8S_DIR, PKI_DIR
from numalab.render import render

READY_TIMEOUT = 300
SERVER_SECRETS = ("apiserver.key", "apiserver-kubelet-client.key", "sa.key")
SERVER_PUBLIC = ("apiserver.crt", "apiserver-kubelet-client.crt", "sa.pub")
COMPONENT_KUBECONFIGS = ("controller-manager.conf", "scheduler.conf")


def put_binary(name: str):  # noqa: ANN201 - an OperationMeta
    """One Kubernetes binary into /usr/local/bin (compared by its stamp: a second run uploads nothing)."""
    return stamped_file(name=f"{name} binary", src=str(controller.binaries(host).path(name)),
                        dest=f"{components.BIN_DIR}/{name}", mode="755")


def put_unit(component: components.Component):  # noqa: ANN201 - an OperationMeta
    """The component's systemd unit, with the host's Go environment (context.go_environment)."""
    text = render("k8s/component.service.j2", component=component, environment=context.go_environment(host))
    return files.put(name=f"{component.name} unit", src=StringIO(text),
                     dest=f"/etc/systemd/system/{component.name}.service", mode="644")


@deploy("control_plane")
def control_plane() -> None:
    """etcd and the three control-plane components; waits for the API server's /readyz."""
    cluster = context.cluster_of(host)
    pki = controller.pki(host)
    node = context.node_name(host)

    pod_routes(cluster, node)  # answers to pods that reach the API server through the `kubernetes` Service
    files.directory(name="Kubernetes config dir", path=PKI_DIR, mode="755")
    certs = [
        files.put(name=f"Put {name}", src=StringIO(pki.read(name).decode()), dest=f"{PKI_DIR}/{name}", mode="644")
        for name in SERVER_PUBLIC
    ]
    certs += [
        secret_file(name=f"Put {name}", content=pki.read(name), dest=f"{PKI_DIR}/{name}") for name in SERVER_SECRETS
    ]
    certs += [
        secret_file(name=f"Put {name}", content=pki.read(name), dest=f"{K8S_DIR}/{name}")
        for name in COMPONENT_KUBECONFIGS
    ]

    etcd_config = files.put(
        name="etcd settings (one member on loopback)",
        src=StringIO(render("k8s/etcd.default.j2", environment={**components.etcd_environment(cluster),
                                                                   **context.go_environment(host)})),
        dest="/etc/default/etcd", mode="644",
    )
    running_and_current("etcd", "etcd enabled and running", "Restart etcd for its new settings", [etcd_config])

    changed = [etcd_config, *certs]
    # Every binary and unit first, one daemon-reload, then the starts: an upload beside a starting API server
    # took 11-14 s (its guest busy starting it), about 5 s before it starts; a reload is about 3 s.
    ordered = (components.apiserver(cluster), components.controller_manager(cluster), components.scheduler(cluster))
    binaries = [put_binary(component.name) for component in ordered]
    units = [put_unit(component) for component in ordered]
    systemd.daemon_reload(name="Reload systemd for the control plane's units", _if=any_changed(*units))
    for component, binary, unit in zip(ordered, binaries, units, strict=True):
        running_and_current(component.name, f"{component.name} enabled and running",
                            f"Restart {component.name} for its new binary, unit or certificates",
                            [binary, unit, *changed])
        changed += [binary, unit]

    # Ready before the run: wait only if this run restarted something. Not ready: wait in any case.
    ready_before = https_ok(f"{cluster.apiserver_url}/readyz", pki.path("ca.crt"))
    wait_until(
        name="Wait for kube-apiserver /readyz",
        check=f"curl -sf --cacert {PKI_DIR}/ca.crt https://127.0.0.1:6443/readyz >/dev/null",
        timeout=READY_TIMEOUT, unit="kube-apiserver", node=node, what="kube-apiserver",
        **({"_if": any_changed(*changed)} if ready_before else {}),
    )
