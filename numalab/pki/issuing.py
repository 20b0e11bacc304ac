"""Keys and certificates in memory: make the CA, issue a leaf, say why an existing one no longer fits. No I/O.

Every key is ECDSA P-256 (kube-apiserver, kubelet, client-go and the Go registry all take it; tokens are
signed ES256). Private keys are PKCS#8 PEM without a passphrase. Errors never carry key bytes.
"""

from __future__ import annotations

import ipaddress
import secrets
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from numalab.pki.profiles import SERVER, LeafProfile

CURVE = ec.SECP256R1
CA_VALIDITY = timedelta(days=3650)
LEAF_VALIDITY = timedelta(days=365)
RENEW_BEFORE = timedelta(days=30)  # a leaf with less left is re-issued; a CA with less left is refused
BACKDATE = timedelta(hours=1)  # tolerate guests whose clock lags the controller's


class PkiError(RuntimeError):
    """The PKI directory holds something this module will not overwrite; the message says which file and why."""


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(CURVE())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_key(data: bytes, where: str) -> ec.EllipticCurvePrivateKey:
    """The private key in `data`; PkiError naming `where` (a path) if it is not an unencrypted ECDSA PEM key."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise PkiError(f"{where}: not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError(f"{where}: expected an ECDSA key, found {type(key).__name__}")
    return key


def load_cert(data: bytes, where: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        raise PkiError(f"{where}: not a PEM certificate") from None


def same_public_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    return cert.public_key() == key.public_key()


def make_ca(key: ec.EllipticCurvePrivateKey, cluster: str, now: datetime) -> x509.Certificate:
    """A self-signed CA for `cluster`, valid CA_VALIDITY, allowed to sign leaves only (path length 0)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{cluster}-ca")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    builder = (
        _base(name, key, now, CA_VALIDITY)
        .issuer_name(name)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
    )
    return builder.sign(key, hashes.SHA256())


def issue(
    profile: LeafProfile,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: datetime,
) -> x509.Certificate:
    """The leaf `profile` describes, for `key`, signed by the CA, valid LEAF_VALIDITY (never past the CA)."""
    validity = min(LEAF_VALIDITY, ca_cert.not_valid_after_utc - now)
    eku = ExtendedKeyUsageOID.SERVER_AUTH if profile.usage == SERVER else ExtendedKeyUsageOID.CLIENT_AUTH
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        _base(subject_of(profile), key, now, validity)
        .issuer_name(ca_cert.subject)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
    )
    names = _san_entries(profile)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def subject_of(profile: LeafProfile) -> x509.Name:
    """O first, then CN, as kubeadm and the CSR signers write them."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in profile.organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, profile.common_name))
    return x509.Name(attributes)


def ca_problem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, now: datetime) -> str | None:
    """Why this CA pair cannot sign leaves (key of another cert, not a CA, expiring), or None."""
    if not same_public_key(cert, key):
        return "the key does not belong to the certificate"
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        return "the certificate is not a CA (basicConstraints CA:TRUE missing)"
    left = cert.not_valid_after_utc - now
    if left < RENEW_BEFORE:
        return f"the CA expires on {cert.not_valid_after_utc:%Y-%m-%d} ({left.days} days left)"
    return None


def leaf_mismatch(
    profile: LeafProfile,
    cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    now: datetime,
) -> str | None:
    """Why an existing leaf must be re-issued (a short reason for logs), or None if it still fits."""
    if not same_public_key(cert, key):
        return "certificate and key do not match"
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not signed by the current CA"
    if cert.subject != subject_of(profile):
        return f"subject {cert.subject.rfc4514_string()} differs from {subject_of(profile).rfc4514_string()}"
    if set(_sans_of(cert)) != set(_san_entries(profile)):
        return "SANs differ"
    try:
        usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = []
    expected = ExtendedKeyUsageOID.SERVER_AUTH if profile.usage == SERVER else ExtendedKeyUsageOID.CLIENT_AUTH
    if usages != [expected]:
        return "extended key usage differs"
    left = cert.not_valid_after_utc - now
    if left < RENEW_BEFORE:
        return f"expires on {cert.not_valid_after_utc:%Y-%m-%d} ({left.days} days left)"
    if cert.not_valid_before_utc > now:
        return f"not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    return None


def _base(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, now: datetime, validity: timedelta
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(key.public_key())
        .serial_number(secrets.randbits(127) + 1)
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
    )


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,  # only meaningful for RSA key transport
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _san_entries(profile: LeafProfile) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in profile.dns_names]
    names += [x509.IPAddress(ipaddress.IPv4Address(address)) for address in profile.ip_addresses]
    return names


def _sans_of(cert: x509.Certificate) -> list[x509.GeneralName]:
    try:
        return list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return []
