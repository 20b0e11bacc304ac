"""A real registry for the image tests: Debian's docker-registry 2.8 serving TLS on 127.0.0.1.

The certificate comes from a throwaway CA made here and names `registry` and 127.0.0.1, the way
the lab's registry certificate names `registry`. The registry stops when the test module ends.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from numalab.images.push import RegistryClient, RegistryError

REGISTRY_BINARY = "/usr/bin/docker-registry"
START_SECONDS = 20.0


@dataclass(frozen=True)
class LocalRegistry:
    port: int
    ca_file: Path
    storage: Path
    log: Path

    @property
    def name(self) -> str:
        """The registry as the lab names it; reach it with resolve=`registry:127.0.0.1`."""
        return f"registry:{self.port}"

    @property
    def resolve(self) -> str:
        return "registry:127.0.0.1"

    def client(self) -> RegistryClient:
        return RegistryClient(self.name, self.ca_file, self.resolve)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(directory: Path, common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA written to directory/<common_name>.crt."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    (directory / f"{common_name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def make_server_cert(directory: Path, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate) -> None:
    """server.crt/server.key for `registry` and 127.0.0.1, signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    san = x509.SubjectAlternativeName([x509.DNSName("registry"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (x509.CertificateBuilder().subject_name(_name("registry")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(san, critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (directory / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def write_config(directory: Path, port: int) -> Path:
    config = directory / "config.yml"
    config.write_text(f"""version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {directory / "storage"}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
  tls:
    certificate: {directory / "server.crt"}
    key: {directory / "server.key"}
""")
    return config


def _wait_ready(registry: LocalRegistry, process: subprocess.Popen) -> None:
    client = registry.client()
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"docker-registry exited {process.returncode}: {registry.log.read_text()[-2000:]}")
        try:
            if client.request("GET", "/v2/", "ping", "-").status == 200:
                return
        except RegistryError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"docker-registry did not answer /v2/ within {START_SECONDS}s: {registry.log.read_text()}")


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[LocalRegistry]:
    """docker-registry serving TLS on a free 127.0.0.1 port with storage in a temporary directory."""
    directory = tmp_path_factory.mktemp("registry")
    ca_key, ca_cert = make_ca(directory, "lab-ca")
    make_server_cert(directory, ca_key, ca_cert)
    port = free_port()
    config = write_config(directory, port)
    local = LocalRegistry(port, directory / "lab-ca.crt", directory / "storage", directory / "registry.log")
    with local.log.open("wb") as log:
        process = subprocess.Popen([REGISTRY_BINARY, "serve", str(config)], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(local, process)
        yield local
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
