"""Routes to the nodes' pod CIDRs, as a oneshot unit: every node has them (no overlay), and so has the
server, which answers pods through the `kubernetes` Service (kube-proxy DNATs it to the server's address)."""

from __future__ import annotations

from io import StringIO

from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy.services import running_and_current
from numalab.model.cluster import Cluster
from numalab.render import render

UNIT = "numalab-pod-routes"


def pod_routes(cluster: Cluster, name: str) -> None:
    """The unit with a route to every other node's pods, started, and re-run when it changed."""
    routes = files.put(name="Routes to the other nodes' pod CIDRs",
                       src=StringIO(render("k8s/pod-routes.service.j2", routes=cluster.pod_routes(name))),
                       dest=f"/etc/systemd/system/{UNIT}.service", mode="644")
    systemd.daemon_reload(name="Reload systemd for the routes unit", _if=any_changed(routes))
    running_and_current(UNIT, "Pod routes in place", "Re-apply the pod routes", [routes])
