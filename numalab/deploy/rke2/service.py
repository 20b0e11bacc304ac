"""Stage `rke2_service`: rke2-server or rke2-agent enabled and started (restarted when its files changed or
rke2_install installed another release), the server's kubeconfig fetched to the state dir with its address
rewritten (0600), and a wait until the node is Ready whose error names `journalctl -u rke2-server` /
`rke2-agent`. Then, if the policy changed, the node is uncordoned."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import yaml
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files, python, server, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import api, context, policy_reset
from numalab.deploy.rke2.config import Rke2Files, kubeconfig
from numalab.files import write_private
from numalab.model.rke2_install import rewrite_kubeconfig_server

SERVER_KUBECONFIG = "/etc/rancher/rke2/rke2.yaml"


def install_kubeconfig(fetched: Path, dest: Path, address: str) -> None:
    """rke2.yaml as fetched -> `dest` (0600) naming the server by the address the controller reaches."""
    fetched.chmod(0o600)
    document = yaml.safe_load(fetched.read_text())
    write_private(dest, yaml.safe_dump(rewrite_kubeconfig_server(document, address), sort_keys=False).encode())


def wait_for_file_command(path: str, timeout: float, unit: str) -> str:
    return (f"timeout {int(timeout)} sh -c 'until [ -s {shlex.quote(path)} ]; do sleep 2; done' || "
            f"{{ echo '{path} not written after {int(timeout)} s; see `journalctl -u {unit}`' >&2; exit 1; }}")


@deploy("rke2_service")
def rke2_service(written: Rke2Files, installed: Sequence[OperationMeta]) -> None:
    """Start the service, or restart it when `written` (rke2_config) or `installed` (rke2_install) changed
    something; on the server fetch the kubeconfig; wait until the node is Ready."""
    unit, name = written.service, context.node_name(host)
    timeout = float(context.data(host, "k8s_node_ready_timeout"))
    config = kubeconfig()
    existing = api.read_node(config, name)
    started = systemd.service(name=f"{unit} enabled and running", service=unit, running=True, enabled=True)
    restarted = systemd.service(name=f"Restart {unit} for its new config or release", service=unit,
                                restarted=True, _if=any_changed(*written.changed, *installed))
    if unit == "rke2-server":
        server.shell(name=f"Wait until {unit} writes its kubeconfig",
                     commands=[wait_for_file_command(SERVER_KUBECONFIG, timeout, unit)],
                     _if=any_changed(started, restarted))
        local = context.state_dir(host) / "rke2"
        local.mkdir(mode=0o700, parents=True, exist_ok=True)
        fetched = files.get(name="Fetch the server's kubeconfig", src=SERVER_KUBECONFIG, dest=str(local / "rke2.yaml"))
        when = {} if not config.exists() else {"_if": fetched.did_change}
        python.call(name="Admin kubeconfig in the state dir (server address rewritten, 0600)",
                    function=install_kubeconfig, fetched=local / "rke2.yaml", dest=config,
                    address=str(context.cluster_of(host).server.address), **when)
    if not api.node_is_ready(existing) or written.stale:
        python.call(name=f"Wait until node {name} is Ready", function=api.wait_node_ready,
                    kubeconfig=config, node=name, timeout=timeout, unit=unit)
    else:
        python.call(name=f"Wait until node {name} is Ready again", function=api.wait_node_ready,
                    kubeconfig=config, node=name, timeout=timeout, unit=unit,
                    _if=any_changed(started, restarted))
    policy_reset.after_ready(written.stale, config, name)
