"""The cluster PKI, made on the controller: CA, serving and client certificates, kubeconfigs, service-account keys.

`ensure_pki(spec, directory)` is the one entry point with I/O; the modules beside it are pure.
"""

from numalab.pki.issuing import PkiError
from numalab.pki.kubeconfigs import kubeconfig
from numalab.pki.spec import Host, PkiSpec
from numalab.pki.store import ClusterPki, ensure_pki

__all__ = ["ClusterPki", "Host", "PkiError", "PkiSpec", "ensure_pki", "kubeconfig"]
