"""Stage `topology_api` (the control-plane host, before numa-align starts): the NodeResourceTopology CRD
and numa-align's right to publish its node's object, when `numa_align_nrt` is on.

The CRD is the one the API's Go module ships (numalab.k8s.nrt_crd); the rights are
templates/plugin/nrt-access.yaml.j2 (the DaemonSet's ServiceAccount, and the unit's certificate user under
the upstream distribution): get nodes, list pods (the node's Running pods, for the cpuset auditor),
get/create/update NodeResourceTopology objects, get/create/update Leases in kube-system (its liveness
Lease, numa_align.leases) and create Events in default (the kubelet guard's moves, numa_align.guard_events).
Applied only when the live ClusterRole carries another checksum (of the access manifest and the CRD) or the
CRD is not Established; then the CRD is waited for until served.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from numa_align.nrt_api import CRD_NAME
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import python

from numalab.deploy import api, context, manifests
from numalab.k8s.errors import BinariesError
from numalab.k8s.nrt_crd import nrt_crd
from numalab.pki.profiles import NUMA_ALIGN_USER

ACCESS_TEMPLATE = "plugin/nrt-access.yaml.j2"
CLUSTER_ROLE = "numa-lab:numa-align-nrt"
ESTABLISHED_TIMEOUT = 60.0


def access_manifest(crd_text: str, user: str | None) -> str:
    return manifests.checksummed(ACCESS_TEMPLATE, namespace=manifests.NAMESPACE, service_account=manifests.NAME,
                                 user=user, crd_sha256=hashlib.sha256(crd_text.encode()).hexdigest())



def apply_topology_api(kubeconfig: Path, crd_text: str, access_text: str) -> None:
    """The CRD first, served before the rights that name its resource and before any plugin publishes."""
    manifests.apply(kubeconfig, crd_text)
    api.wait_crd_established(kubeconfig, CRD_NAME, ESTABLISHED_TIMEOUT)
    manifests.apply(kubeconfig, access_text)


@deploy("topology_api")
def topology_api(distribution: str) -> None:
    """The NodeResourceTopology CRD and numa-align's rights to publish, when numa_align_nrt is on."""
    if not context.publishes_nrt(host):
        host.noop("numa_align_nrt is off: no NodeResourceTopology CRD or rights applied")
        return
    try:
        crd_text = yaml.safe_dump(nrt_crd(), sort_keys=False)
    except BinariesError as exc:
        raise DeployError(f"{host.name}: {exc}") from None
    user = NUMA_ALIGN_USER if distribution == "upstream" else None
    access_text = access_manifest(crd_text, user)
    kubeconfig = context.state_dir(host) / "kubeconfig"
    live = manifests.cluster_role_checksum(kubeconfig, CLUSTER_ROLE)
    if live == manifests.manifest_checksum(access_text, "ClusterRole") and api.crd_established(kubeconfig, CRD_NAME):
        host.noop(f"the NodeResourceTopology CRD is served and numa-align may publish ({CLUSTER_ROLE})")
        return
    python.call(name="Apply the NodeResourceTopology CRD and numa-align's rights to publish",
                function=apply_topology_api, kubeconfig=kubeconfig, crd_text=crd_text, access_text=access_text)
