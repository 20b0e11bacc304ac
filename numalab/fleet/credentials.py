"""Certificates and kubeconfigs of one fleet control plane, made by numa-lab's own PKI code (numalab.pki).

ensure_pki makes the CA, the apiserver's serving certificate (SANs include 127.0.0.1 and localhost), the
client certificates of admin, controller-manager, scheduler and numa-scheduler, and the service-account
key pair, as for the lab. Two things differ: the components' kubeconfigs point at the apiserver's port of
this run (the lab's are fixed at 6443), and one more leaf, `loopback`, serves /healthz and /metrics of the
schedulers, the controller-manager and kwok, so every readiness check verifies its peer against the CA.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from numalab.files import write_private
from numalab.fleet.components import HOST, Layout
from numalab.pki import Host, PkiSpec, ensure_pki, issuing, kubeconfig
from numalab.pki.profiles import ADMIN_USER, NUMA_SCHEDULER_USER, SERVER, LeafProfile

CLUSTER = "numa-lab-fleet"
# kubeconfig file stem -> (the PKI's credential stem, the user it names)
KUBECONFIGS = {
    "admin": ("admin", ADMIN_USER),
    "controller-manager": ("controller-manager", "system:kube-controller-manager"),
    "scheduler": ("scheduler", "system:kube-scheduler"),
    "numa-scheduler": ("numa-scheduler", NUMA_SCHEDULER_USER),
}
LOOPBACK = LeafProfile("loopback", f"{CLUSTER}-loopback", SERVER, (), ("localhost",),
                       (ipaddress.IPv4Address(HOST),))


@dataclass(frozen=True)
class Credentials:
    """What a client of this control plane needs: the CA, the admin's certificate and key, its kubeconfig."""

    ca: Path
    admin_cert: Path
    admin_key: Path
    admin_kubeconfig: Path


def make_credentials(layout: Layout, api_url: str, now: datetime | None = None) -> Credentials:
    """Write the PKI under layout.pki and a kubeconfig per KUBECONFIGS entry beside it, all 0600."""
    now = now or datetime.now(UTC)
    spec = PkiSpec(cluster=CLUSTER, server=Host("localhost", HOST), admin_server_url=api_url)
    pki = ensure_pki(spec, layout.pki, now=now)
    ca_cert = issuing.load_cert(pki.read("ca.crt"), str(pki.path("ca.crt")))
    ca_key = issuing.load_key(pki.read("ca.key"), str(pki.path("ca.key")))
    key = issuing.new_key()
    write_private(layout.pem("loopback.key"), issuing.key_pem(key))
    write_private(layout.pem("loopback.crt"), issuing.cert_pem(issuing.issue(LOOPBACK, key, ca_cert, ca_key, now)))
    for name, (credential, user) in KUBECONFIGS.items():
        text = kubeconfig(api_url, pki.read("ca.crt"), pki.read(f"{credential}.crt"), pki.read(f"{credential}.key"),
                          user, cluster=CLUSTER)
        write_private(layout.kubeconfig(name), text.encode())
    return Credentials(ca=pki.path("ca.crt"), admin_cert=pki.path("admin.crt"), admin_key=pki.path("admin.key"),
                       admin_kubeconfig=layout.kubeconfig("admin"))
