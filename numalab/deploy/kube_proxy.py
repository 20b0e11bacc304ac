"""Stage `kube_proxy` (every host that runs pods, distribution upstream): Services reach their pods.

kube-proxy comes from the same build as the kubelet (numalab.k8s), runs as a systemd unit with a
KubeProxyConfiguration from numalab.model.components (iptables mode; why is said there) and its own
client certificate (user system:kube-proxy, which the API server's bootstrap policy binds to
system:node-proxier). Restarted only when its binary, config or credentials change.
"""

from __future__ import annotations

from io import StringIO

import yaml
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import context, controller
from numalab.deploy.control_plane import put_binary, put_unit
from numalab.deploy.operations import secret_file
from numalab.deploy.services import running_and_current
from numalab.deploy.waiting import wait_until
from numalab.model import components
from numalab.model.cluster import Cluster

READY_TIMEOUT = 120


def kube_proxy_config_text(cluster: Cluster, name: str) -> str:
    return yaml.safe_dump(components.kube_proxy_configuration(cluster, name), sort_keys=False)


@deploy("kube_proxy")
def kube_proxy() -> None:
    """kube-proxy's binary, kubeconfig, config and unit; waits for its /healthz when it (re)started."""
    cluster = context.cluster_of(host)
    name = context.node_name(host)
    config = components.kube_proxy_configuration(cluster, name)
    changed = [
        put_binary("kube-proxy"),
        secret_file(name="kube-proxy kubeconfig", content=controller.pki(host).read("kube-proxy.conf"),
                    dest=components.kubeconfig_path("kube-proxy")),
        files.put(name="KubeProxyConfiguration (iptables mode)", src=StringIO(kube_proxy_config_text(cluster, name)),
                  dest=components.KUBE_PROXY_CONFIG, mode="644", create_remote_dir=True),
    ]
    unit = put_unit(components.kube_proxy(cluster, name))
    systemd.daemon_reload(name="Reload systemd for kube-proxy", _if=any_changed(unit))
    running_and_current("kube-proxy", "kube-proxy enabled and running",
                        "Restart kube-proxy for its new binary, config or credentials", [unit, *changed])
    wait_until(
        name="Wait for kube-proxy /healthz",
        check=f"curl -sf http://{config['healthzBindAddress']}/healthz >/dev/null",
        timeout=READY_TIMEOUT, unit="kube-proxy", node=name, what="kube-proxy",
        _if=any_changed(unit, *changed),
    )
