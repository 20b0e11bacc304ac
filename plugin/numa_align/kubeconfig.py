"""Where the Kubernetes API server is and how numa-align proves who it is: in a pod from its service account,
elsewhere (the systemd unit) from a kubeconfig file.

Everything is checked when the configuration is loaded, so a bad kubeconfig stops `numa-align serve` at
start with one line (ConfigError) instead of failing on every publish. Tokens are read from their file on
every request: the kubelet rotates projected service-account tokens in place. The file is read with
PyYAML's safe loader: kubectl writes block style, people also write flow style and block scalars, and
`kubectl config view -o json` prints JSON, which is YAML too.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_UNSUPPORTED_USER = ("exec", "auth-provider", "username", "password")


class ConfigError(ValueError):
    """No usable API server configuration; str() says which file or variable and what is wrong with it."""


@dataclass(frozen=True)
class ClusterConfig:
    """An API server URL (https://, or http:// for tests), how to trust it and the credentials to send.

    `source` says where this came from, for messages. A `*_data` field wins over its file, and a token file
    over a token, as client-go has it.
    """

    server: str
    source: str
    ca_file: Path | None = None
    ca_data: str | None = None
    insecure: bool = False
    token: str | None = None
    token_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None

    @property
    def credentials(self) -> str:
        """What the client authenticates with, as a 403 or 401 message names it."""
        kinds = []
        if self.token_file is not None:
            kinds.append(f"the token in {self.token_file}")
        elif self.token:
            kinds.append("a bearer token")
        if self.cert_data or self.cert_file:
            kinds.append("a client certificate")
        return f"{' and '.join(kinds) or 'no credentials'} ({self.source})"

    def bearer_token(self) -> str | None:
        if self.token_file is None:
            return self.token
        try:
            return self.token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {self.token_file}: {exc.strerror} ({self.source})") from None

    def ssl_context(self) -> ssl.SSLContext:
        """Trust the cluster's CA (the system's without one) and present the client certificate, if any.

        Certificate or key data is written to a private temporary directory only while it is loaded.
        """
        try:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"the certificate authority ({self.source}) does not load: {exc}") from None
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if not (self.cert_data or self.cert_file):
            return context
        if not (self.key_data or self.key_file):
            raise ConfigError(f"a client certificate without a client key ({self.source})")
        private = Path(tempfile.mkdtemp(prefix="numa-align-"))  # 0700
        try:
            cert = _materialize(private / "client.crt", self.cert_data) or self.cert_file
            key = _materialize(private / "client.key", self.key_data) or self.key_file
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"the client certificate and key ({self.source}) do not load: {exc}") from None
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return context


def _materialize(path: Path, data: bytes | None) -> Path | None:
    if data is None:
        return None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def load_config(kubeconfig: Path | None, env: Mapping[str, str] | None = None,
                service_account: Path = SERVICE_ACCOUNT_DIR) -> ClusterConfig:
    """The kubeconfig's current context, or the pod's service account when no kubeconfig is given."""
    if kubeconfig is not None:
        return read_kubeconfig(kubeconfig)
    return in_cluster_config(os.environ if env is None else env, service_account)


def in_cluster_config(env: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT_DIR) -> ClusterConfig:
    """The API server's Service address from the environment, the token and CA the kubelet mounts."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("no kubeconfig given and not in a pod (KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT "
                          "unset): give a kubeconfig file")
    token, ca = service_account / "token", service_account / "ca.crt"
    for path in (token, ca):
        if not path.is_file():
            raise ConfigError(f"in a pod, but {path} does not exist: mount the service account token "
                              "(automountServiceAccountToken: true) or give a kubeconfig file")
    address = f"[{host}]" if ":" in host else host
    return ClusterConfig(server=f"https://{address}:{port}", source=f"in-cluster service account, {service_account}",
                         ca_file=ca, token_file=token)


def read_kubeconfig(path: Path) -> ClusterConfig:
    """The current context's cluster and user; relative file names are relative to the kubeconfig's directory."""
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path} is not YAML: {_yaml_problem(exc)}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping (kind: Config)")
    where = f"kubeconfig {path}"
    current = document.get("current-context")
    if not current:
        raise ConfigError(f"{where} has no current-context")
    context = _entry(document, "contexts", "context", current, where)
    where = f"{where}, context {current}"
    cluster = _entry(document, "clusters", "cluster", context.get("cluster"), where)
    user_name = context.get("user")
    user = _entry(document, "users", "user", user_name, where) if user_name else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise ConfigError(f"{where}: cluster server {server!r} is not an https:// (or http://) URL")
    unsupported = [key for key in _UNSUPPORTED_USER if user.get(key)]
    if unsupported:
        raise ConfigError(f"{where}: user {user_name!r} authenticates with {', '.join(unsupported)}, which "
                          "numa-align does not do: give it a token, tokenFile or client certificate")
    base = path.parent
    return ClusterConfig(
        server=server.rstrip("/"), source=f"{where}, user {user_name}" if user_name else where,
        ca_file=None if cluster.get("certificate-authority-data") else
        _file(base, cluster.get("certificate-authority"), where, "certificate-authority"),
        ca_data=_data(cluster, "certificate-authority-data", where).decode("latin-1") or None,
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        token=user.get("token") or None,
        token_file=_file(base, user.get("tokenFile"), where, "tokenFile"),
        cert_file=_file(base, user.get("client-certificate"), where, "client-certificate"),
        key_file=_file(base, user.get("client-key"), where, "client-key"),
        cert_data=_data(user, "client-certificate-data", where) or None,
        key_data=_data(user, "client-key-data", where) or None,
    )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """`line L, column C: what the parser found`, as one line (PyYAML's own text spans several)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return " ".join(str(exc).split())
    mark = exc.problem_mark
    context = f"{exc.context}: " if exc.context else ""
    return f"line {mark.line + 1}, column {mark.column + 1}: {context}{exc.problem}"


def _entry(document: dict[str, Any], section: str, field: str, name: Any, where: str) -> dict[str, Any]:
    for item in document.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(field) or {}
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {section} entry {name!r} has no {field} mapping")
            return value
    raise ConfigError(f"{where}: no {section} entry named {name!r}")


def _file(base: Path, value: Any, where: str, field: str) -> Path | None:
    if not value:
        return None
    path = base / str(value)
    if not path.is_file():
        raise ConfigError(f"{where}: {field} {path} does not exist")
    return path


def _data(section: dict[str, Any], field: str, where: str) -> bytes:
    """Base64 data; line breaks and spaces are dropped (a `|` block scalar keeps them, a folded one makes
    spaces of them; client-go's decoder skips line breaks)."""
    value = section.get(field)
    if not value:
        return b""
    try:
        return base64.b64decode("".join(str(value).split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: {field} is not base64") from None
