"""Every certificate chains to the cluster CA and says what its user needs (CN, O, SANs, key usages)."""

from __future__ import annotations

import base64
import ipaddress
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from numalab.model.errors import ValidationError
from numalab.pki import ClusterPki, kubeconfig
from tests.pki.conftest import load

API_DNS = {
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "server",
    "localhost",
}
# name: (CN, O, DNS SANs, IP SANs, EKU)
SERVER_AUTH, CLIENT_AUTH = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
EXPECTED = {
    "registry": ("registry", [], {"registry"}, {"10.77.0.5"}, SERVER_AUTH),
    "apiserver": ("kube-apiserver", [], API_DNS, {"10.77.0.10", "10.96.0.1", "127.0.0.1"}, SERVER_AUTH),
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ["system:masters"], set(), set(), CLIENT_AUTH),
    "admin": ("numa-lab-admin", ["system:masters"], set(), set(), CLIENT_AUTH),
    "controller-manager": ("system:kube-controller-manager", [], set(), set(), CLIENT_AUTH),
    "scheduler": ("system:kube-scheduler", [], set(), set(), CLIENT_AUTH),
    "kube-proxy": ("system:kube-proxy", [], set(), set(), CLIENT_AUTH),
    "numa-align": ("numa-lab:numa-align", [], set(), set(), CLIENT_AUTH),
    "numa-scheduler": ("numa-lab:numa-scheduler", [], set(), set(), CLIENT_AUTH),
    "nodes/worker-1/kubelet-client": ("system:node:worker-1", ["system:nodes"], set(), set(), CLIENT_AUTH),
    "nodes/worker-1/kubelet": ("system:node:worker-1", ["system:nodes"], {"worker-1"}, {"10.77.0.11"}, SERVER_AUTH),
    "nodes/worker-2/kubelet-client": ("system:node:worker-2", ["system:nodes"], set(), set(), CLIENT_AUTH),
    "nodes/worker-2/kubelet": ("system:node:worker-2", ["system:nodes"], {"worker-2"}, {"10.77.0.12"}, SERVER_AUTH),
}
KUBECONFIGS = {
    "admin.conf": ("https://10.77.0.10:6443", "admin", "numa-lab-admin"),
    "controller-manager.conf": ("https://127.0.0.1:6443", "controller-manager", "system:kube-controller-manager"),
    "scheduler.conf": ("https://127.0.0.1:6443", "scheduler", "system:kube-scheduler"),
    "numa-scheduler.conf": ("https://127.0.0.1:6443", "numa-scheduler", "numa-lab:numa-scheduler"),
    "kube-proxy.conf": ("https://10.77.0.10:6443", "kube-proxy", "system:kube-proxy"),
    "numa-align.conf": ("https://10.77.0.10:6443", "numa-align", "numa-lab:numa-align"),
    "nodes/worker-1/kubelet.conf": ("https://10.77.0.10:6443", "nodes/worker-1/kubelet-client", "system:node:worker-1"),
    "nodes/worker-2/kubelet.conf": ("https://10.77.0.10:6443", "nodes/worker-2/kubelet-client", "system:node:worker-2"),
}


def test_the_files_are_exactly_the_named_items(pki: ClusterPki) -> None:
    expected = {"ca.crt", "ca.key", "sa.key", "sa.pub", *KUBECONFIGS}
    expected |= {f"{name}.{ext}" for name in EXPECTED for ext in ("crt", "key")}
    assert set(pki.files) == expected
    assert set(pki.changed) == expected | {str(pki.admin_kubeconfig)}
    assert set(pki.reasons.values()) == {"missing"}
    on_disk = {str(p.relative_to(pki.directory)) for p in pki.directory.rglob("*") if p.is_file()}
    assert on_disk == expected | {".lock"}


def test_ca_is_a_ten_year_p256_ca(pki: ClusterPki) -> None:
    ca = load(pki, "ca.crt")
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey) and ca.public_key().curve.name == "secp256r1"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "numa-lab-ca"
    assert ca.not_valid_after_utc - ca.not_valid_before_utc > timedelta(days=3650)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_leaf_subject_sans_and_usages(pki: ClusterPki, name: str) -> None:
    common_name, orgs, dns, ips, eku = EXPECTED[name]
    cert = load(pki, f"{name}.crt")
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == orgs
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = x509.SubjectAlternativeName([])
    assert set(san.get_values_for_type(x509.DNSName)) == dns
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == ips
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [eku]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    left = cert.not_valid_after_utc - datetime.now(UTC)
    assert timedelta(days=364) < left <= timedelta(days=365)
    key = load_pem_private_key(pki.read(f"{name}.key"), password=None)
    assert key.public_key() == cert.public_key()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_openssl_verifies_each_leaf_for_its_purpose(pki: ClusterPki, name: str) -> None:
    purpose = "sslserver" if EXPECTED[name][4] == SERVER_AUTH else "sslclient"
    wrong = "sslclient" if purpose == "sslserver" else "sslserver"
    ca, leaf = str(pki.path("ca.crt")), str(pki.path(f"{name}.crt"))
    good = subprocess.run(
        ["openssl", "verify", "-x509_strict", "-purpose", purpose, "-CAfile", ca, leaf], text=True, capture_output=True
    )
    assert good.returncode == 0, good.stderr
    bad = subprocess.run(["openssl", "verify", "-purpose", wrong, "-CAfile", ca, leaf], capture_output=True)
    assert bad.returncode != 0


@pytest.mark.parametrize(
    ("name", "subject"),
    [
        ("apiserver", x509.DNSName("kubernetes.default.svc")),
        ("apiserver", x509.IPAddress(ipaddress.IPv4Address("10.96.0.1"))),
        ("registry", x509.DNSName("registry")),
        ("nodes/worker-2/kubelet", x509.IPAddress(ipaddress.IPv4Address("10.77.0.12"))),
    ],
)
def test_web_pki_style_server_verification(pki: ClusterPki, name: str, subject: x509.GeneralName) -> None:
    store = Store([load(pki, "ca.crt")])
    verifier = PolicyBuilder().store(store).build_server_verifier(subject)
    chain = verifier.verify(load(pki, f"{name}.crt"), [])
    assert chain[-1] == load(pki, "ca.crt")


def test_service_account_pair(pki: ClusterPki) -> None:
    key = load_pem_private_key(pki.read("sa.key"), password=None)
    assert load_pem_public_key(pki.read("sa.pub")) == key.public_key()
    assert pki.read("sa.pub").startswith(b"-----BEGIN PUBLIC KEY-----")


@pytest.mark.parametrize("name", sorted(KUBECONFIGS))
def test_kubeconfigs_embed_ca_and_credential(pki: ClusterPki, name: str) -> None:
    url, credential, user = KUBECONFIGS[name]
    config = yaml.safe_load(pki.read(name))
    assert config["current-context"] == f"{user}@numa-lab"
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == url
    assert base64.b64decode(cluster["certificate-authority-data"]) == pki.read("ca.crt")
    entry = config["users"][0]
    assert entry["name"] == user
    assert base64.b64decode(entry["user"]["client-certificate-data"]) == pki.read(f"{credential}.crt")
    assert base64.b64decode(entry["user"]["client-key-data"]) == pki.read(f"{credential}.key")


def test_admin_kubeconfig_copy(pki: ClusterPki) -> None:
    assert pki.admin_kubeconfig is not None
    assert pki.admin_kubeconfig.read_bytes() == pki.read("admin.conf")
    assert stat.S_IMODE(pki.admin_kubeconfig.stat().st_mode) == 0o600


def test_modes_are_private(pki: ClusterPki) -> None:
    paths = [pki.directory, *pki.directory.rglob("*")]
    modes = {str(p.relative_to(pki.directory)): stat.S_IMODE(p.stat().st_mode) for p in paths}
    assert {mode for name, mode in modes.items() if (pki.directory / name).is_dir()} == {0o700}
    assert {mode for name, mode in modes.items() if (pki.directory / name).is_file()} == {0o600}
    assert {"nodes", "nodes/worker-1", "nodes/worker-2"} <= set(modes)


def test_node_files(pki: ClusterPki) -> None:
    assert set(pki.node_files("worker-1")) == {
        f"nodes/worker-1/{name}"
        for name in ("kubelet.crt", "kubelet.key", "kubelet-client.crt", "kubelet-client.key", "kubelet.conf")
    }
    with pytest.raises(KeyError, match="'nodes/worker-9/kubelet.crt' is not a file of the PKI"):
        pki.path("nodes/worker-9/kubelet.crt")


def test_no_files_left_behind_by_writes(pki: ClusterPki) -> None:
    assert not [p for p in Path(pki.directory).rglob("*.tmp")]


def test_kubeconfig_wants_https_and_is_deterministic(pki: ClusterPki) -> None:
    ca, cert, key = pki.read("ca.crt"), pki.read("admin.crt"), pki.read("admin.key")
    with pytest.raises(ValidationError, match="server_url: expected an https:// URL, got 'http://10.77.0.10:6443'"):
        kubeconfig("http://10.77.0.10:6443", ca, cert, key, "numa-lab-admin")
    text = kubeconfig("https://10.77.0.10:6443", ca, cert, key, "numa-lab-admin", cluster="numa-lab")
    assert text == kubeconfig("https://10.77.0.10:6443", ca, cert, key, "numa-lab-admin", cluster="numa-lab")
    assert text.encode() == pki.read("admin.conf")
