"""One small cluster spec (server, two workers, registry) and a PKI made from it in a fresh directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from numalab.pki import ClusterPki, Host, PkiSpec, ensure_pki

SERVER = Host("server", "10.77.0.10")
WORKERS = (Host("worker-1", "10.77.0.11"), Host("worker-2", "10.77.0.12"))
REGISTRY = Host("registry", "10.77.0.5")


def lab_spec(**changes: Any) -> PkiSpec:
    fields: dict[str, Any] = {"cluster": "numa-lab", "server": SERVER, "nodes": WORKERS, "registry": REGISTRY}
    fields.update(changes)
    return PkiSpec(**fields)


def load(pki: ClusterPki, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pki.read(name))


@pytest.fixture
def pki_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "pki"


@pytest.fixture
def pki(pki_dir: Path) -> ClusterPki:
    return ensure_pki(lab_spec(), pki_dir, admin_kubeconfig=pki_dir.parent / "kubeconfig")
