"""Stage `pki`: every cluster host trusts the cluster CA (system store, and /etc/kubernetes/pki/ca.crt).

The CA and every certificate are made on the controller (numalab.pki, 0600 in the state dir); the
stages that run a component put that component's own files.
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files, server

from numalab.deploy import controller
from numalab.model.components import CLUSTER_CA, PKI_DIR


@deploy("pki")
def pki() -> None:
    """The cluster CA in the host's trust store and beside the Kubernetes components."""
    ca = controller.pki(host).read("ca.crt").decode()
    trusted = files.put(name="Cluster CA in the system trust store", src=StringIO(ca), dest=CLUSTER_CA, mode="644")
    server.shell(name="Update the system trust store", commands=["update-ca-certificates"], _if=trusted.did_change)
    files.put(name="Cluster CA for the Kubernetes components", src=StringIO(ca), dest=f"{PKI_DIR}/ca.crt",
              mode="644", create_remote_dir=True)
