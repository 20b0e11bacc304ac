"""Certificates for the fake API server's HTTPS (fakekube.serve_kube): a CA, a server certificate for
127.0.0.1 and a client certificate, made with the `cryptography` package, which numa-lab depends on and the
plugin does not."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    """PEM files of a CA, a server certificate for 127.0.0.1 and a client certificate, all under `directory`."""

    directory: Path
    client_cn: str

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    def pem(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()


def make_pki(directory: Path, client_cn: str = "system:node:worker-1") -> Pki:
    """A CA with a server certificate (IP 127.0.0.1) and a client certificate signed by it; EC keys (fast)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    now = datetime.datetime.now(datetime.UTC)

    def issue(cn: str, key, issuer: x509.Name | None, issuer_key, *, ca: bool = False, server: bool = False):
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
                critical=True)
            builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                            critical=False)
        else:
            usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def write(name: str, cert, key) -> None:
        (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{name}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))

    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = issue("fake-kube-ca", ca_key, None, ca_key, ca=True)
    write("ca", ca_cert, ca_key)
    for name, cn, server in (("server", "kube-apiserver", True), ("client", client_cn, False)):
        key = ec.generate_private_key(ec.SECP256R1())
        write(name, issue(cn, key, ca_cert.subject, ca_key, server=server), key)
    return Pki(directory, client_cn)
