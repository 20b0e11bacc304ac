"""The PKI directory on the controller: `ensure_pki` makes what is missing, keeps what still fits, re-issues the rest.

Files are written by numalab.files.write_private (a 0600 temp file, renamed), so no key is ever readable by
others, not even while being written, and a crash leaves either the old or the new file. An existing CA is
never replaced: a cluster whose CA changed under it would need every kubelet re-joined.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from numalab.files import PRIVATE_FILE, file_lock, write_private
from numalab.pki import issuing
from numalab.pki.issuing import PkiError
from numalab.pki.kubeconfigs import kubeconfig
from numalab.pki.profiles import LeafProfile, kubeconfig_profiles, leaf_profiles, node_dir
from numalab.pki.spec import PkiSpec

log = logging.getLogger(__name__)
LOCK_NAME = ".lock"
CA_CERT, CA_KEY = "ca.crt", "ca.key"
SA_KEY, SA_PUB = "sa.key", "sa.pub"
PRIVATE_DIR = 0o700


@dataclass(frozen=True, repr=False)
class ClusterPki:
    """The files of one cluster's PKI, named relative to `directory` (e.g. `apiserver.crt`, `nodes/w1/kubelet.conf`).

    `files` is sorted. `changed` lists the files this call wrote, in order (the admin kubeconfig copy by its
    absolute path), with `reasons[name]` saying why (`missing`, `SANs differ`, `expires on …`).
    The repr holds names only.
    """

    directory: Path
    files: tuple[str, ...]
    changed: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)
    admin_kubeconfig: Path | None = None

    def path(self, name: str) -> Path:
        if name not in self.files:
            raise KeyError(f"{name!r} is not a file of the PKI at {self.directory} (files: {', '.join(self.files)})")
        return self.directory / name

    def read(self, name: str) -> bytes:
        """The bytes of file `name`, for an upload (e.g. pyinfra files.put(src=io.BytesIO(pki.read(...))))."""
        return self.path(name).read_bytes()

    def node_files(self, node: str) -> tuple[str, ...]:
        """The files under nodes/<node>/: kubelet.crt/.key (serving), kubelet.conf (embeds kubelet-client.crt/.key)."""
        prefix = node_dir(node) + "/"
        return tuple(name for name in self.files if name.startswith(prefix))

    def __repr__(self) -> str:
        changed = ", ".join(self.changed) or "nothing"
        return f"<ClusterPki {self.directory}: {len(self.files)} files, changed: {changed}>"


def ensure_pki(
    spec: PkiSpec, directory: Path, *, admin_kubeconfig: Path | None = None, now: datetime | None = None
) -> ClusterPki:
    """Bring `directory` (0700) to the PKI `spec` asks for, under a file lock; see the module docstring.

    With `admin_kubeconfig`, admin.conf is also written there (e.g. `<state_dir>/kubeconfig`, read by `make e2e`).
    Raises PkiError for a CA it will not touch (one of ca.crt/ca.key missing, a key of another cert, expiring).
    """
    now = now or datetime.now(UTC)
    directory = Path(directory)
    _private_dir(directory)
    with file_lock(directory / LOCK_NAME):
        store = _Store(directory)
        ca_cert, ca_key = _ensure_ca(store, spec.cluster, now)
        for profile in leaf_profiles(spec):
            _ensure_leaf(store, profile, ca_cert, ca_key, now)
        _ensure_service_account(store)
        for config in kubeconfig_profiles(spec):
            text = kubeconfig(
                config.server_url,
                store.contents[CA_CERT],
                store.contents[f"{config.credential}.crt"],
                store.contents[f"{config.credential}.key"],
                config.user,
                cluster=spec.cluster,
            )
            store.ensure(config.name, text.encode(), "server URL or credentials changed")
        if admin_kubeconfig is not None:
            _ensure_copy(store, Path(admin_kubeconfig), store.contents["admin.conf"])
    return ClusterPki(
        directory, tuple(sorted(store.contents)), tuple(store.changed), dict(store.reasons), admin_kubeconfig
    )


class _Store:
    """Reads and writes files under `root`, remembering what it kept or wrote and why."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.contents: dict[str, bytes] = {}
        self.changed: list[str] = []
        self.reasons: dict[str, str] = {}
        self._checked: set[Path] = set()

    def read(self, name: str) -> bytes | None:
        path = self.root / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        self._private_parents(name)
        _tighten(path, PRIVATE_FILE)
        return data

    def keep(self, name: str, data: bytes) -> None:
        self.contents[name] = data

    def write(self, name: str, data: bytes, reason: str) -> None:
        self._private_parents(name)
        write_private(self.root / name, data)
        self.contents[name] = data
        self.changed.append(name)
        self.reasons[name] = reason

    def ensure(self, name: str, data: bytes, reason_if_different: str) -> None:
        existing = self.read(name)
        if existing == data:
            self.keep(name, data)
        else:
            self.write(name, data, "missing" if existing is None else reason_if_different)
            log.info("pki: wrote %s (%s)", name, self.reasons[name])

    def where(self, name: str) -> str:
        return str(self.root / name)

    def _private_parents(self, name: str) -> None:
        """Make (or tighten) each directory between root and file `name` 0700, once per directory."""
        parent = self.root
        for part in Path(name).parts[:-1]:
            parent = parent / part
            if parent not in self._checked:
                _private_dir(parent)
                self._checked.add(parent)


def _ensure_ca(store: _Store, cluster: str, now: datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_data, key_data = store.read(CA_CERT), store.read(CA_KEY)
    if cert_data is None and key_data is None:
        key = issuing.new_key()
        cert = issuing.make_ca(key, cluster, now)
        store.write(CA_KEY, issuing.key_pem(key), "missing")
        store.write(CA_CERT, issuing.cert_pem(cert), "missing")
        log.info("pki: made a new cluster CA at %s", store.where(CA_CERT))
        return cert, key
    if cert_data is None or key_data is None:
        present, absent = (CA_KEY, CA_CERT) if cert_data is None else (CA_CERT, CA_KEY)
        raise PkiError(
            f"{store.where(present)} exists but {store.where(absent)} does not; restore {absent}, "
            "or remove both to make a new CA (every certificate and kubeconfig is then re-issued)"
        )
    cert = issuing.load_cert(cert_data, store.where(CA_CERT))
    key = issuing.load_key(key_data, store.where(CA_KEY))
    problem = issuing.ca_problem(cert, key, now)
    if problem:
        raise PkiError(
            f"{store.where(CA_CERT)} and {store.where(CA_KEY)}: {problem}; an existing CA is never replaced: "
            "restore the matching pair, or remove both to make a new CA"
        )
    store.keep(CA_CERT, cert_data)
    store.keep(CA_KEY, key_data)
    return cert, key


def _ensure_leaf(
    store: _Store, profile: LeafProfile, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, now: datetime
) -> None:
    cert_name, key_name = f"{profile.name}.crt", f"{profile.name}.key"
    cert_data, key_data = store.read(cert_name), store.read(key_name)
    if cert_data is not None and key_data is not None:
        reason = _leaf_reason(profile, cert_data, key_data, ca_cert, now)
        if reason is None:
            store.keep(cert_name, cert_data)
            store.keep(key_name, key_data)
            return
    else:
        reason = "missing"
    key = issuing.new_key()
    cert = issuing.issue(profile, key, ca_cert, ca_key, now)
    store.write(key_name, issuing.key_pem(key), reason)  # key first: a crash between leaves a pair that mismatches
    store.write(cert_name, issuing.cert_pem(cert), reason)
    log.info("pki: issued %s (%s)", cert_name, reason)


def _leaf_reason(
    profile: LeafProfile, cert_data: bytes, key_data: bytes, ca_cert: x509.Certificate, now: datetime
) -> str | None:
    try:
        cert = issuing.load_cert(cert_data, f"{profile.name}.crt")
        key = issuing.load_key(key_data, f"{profile.name}.key")
    except PkiError as exc:
        return f"unreadable: {exc}"
    return issuing.leaf_mismatch(profile, cert, key, ca_cert, now)


def _ensure_service_account(store: _Store) -> None:
    """sa.key is made once and kept (replacing it would invalidate every issued token); sa.pub follows it."""
    key_data = store.read(SA_KEY)
    if key_data is None:
        key = issuing.new_key()
        store.write(SA_KEY, issuing.key_pem(key), "missing")
    else:
        key = issuing.load_key(key_data, store.where(SA_KEY))
        store.keep(SA_KEY, key_data)
    store.ensure(SA_PUB, issuing.public_pem(key), "does not match sa.key")


def _ensure_copy(store: _Store, path: Path, data: bytes) -> None:
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        existing = None
    if existing == data:
        _tighten(path, PRIVATE_FILE)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, data)
    store.changed.append(str(path))
    store.reasons[str(path)] = "missing" if existing is None else "admin.conf changed"


def _private_dir(path: Path) -> None:
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    _tighten(path, PRIVATE_DIR)


def _tighten(path: Path, mode: int) -> None:
    """Set exactly `mode`; warn when group or others had access (a copy made by hand, a loose umask at mkdir)."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current != mode:
        if current & 0o077:
            log.warning("pki: %s had mode %o, setting %o", path, current, mode)
        path.chmod(mode)
