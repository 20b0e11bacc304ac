"""RKE2 node configuration (/etc/rancher/rke2/config.yaml) and registry mirrors (registries.yaml).

Checked here so a typo in a label, a taint or the server address fails before a file reaches a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalab.model.errors import ValidationError

SUPERVISOR_PORT = 9345
ROLES = ("server", "agent")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_PREFIX = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:]+\]$")
_MODE = re.compile(r"^0?[0-7]{3}$")


@dataclass(frozen=True)
class Rke2Config:
    """One node's config.yaml. `server` is the first server's host; agents and joining servers need it."""

    role: str
    token: str | None = None
    token_file: str | None = None
    server: str | None = None
    tls_san: tuple[str, ...] = ()
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[str, ...] = ()
    kubelet_args: tuple[str, ...] = ()
    write_kubeconfig_mode: str = "0600"
    node_ip: str | None = None
    system_default_registry: str | None = None  # where every RKE2 system image is pulled from (airgap)
    node_name: str | None = None

    @property
    def server_url(self) -> str | None:
        return None if self.server is None else f"https://{self.server}:{SUPERVISOR_PORT}"

    def template_values(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "token": self.token,
            "token_file": self.token_file,
            "server_url": self.server_url,
            "tls_san": list(self.tls_san),
            "node_labels": [f"{k}={v}" for k, v in sorted(self.node_labels.items())],
            "node_taints": list(self.node_taints),
            "kubelet_args": list(self.kubelet_args),
            "write_kubeconfig_mode": self.write_kubeconfig_mode if self.role == "server" else None,
            "node_ip": self.node_ip,
            "system_default_registry": self.system_default_registry,
            "node_name": self.node_name,
        }


def rke2_config(
    role: str,
    *,
    token: str | None = None,
    token_file: str | None = None,
    server: str | None = None,
    tls_san: Sequence[str] = (),
    node_labels: Mapping[str, str] | None = None,
    node_taints: Sequence[str] = (),
    kubelet_args: Sequence[str] = (),
    write_kubeconfig_mode: str = "0600",
    node_ip: str | None = None,
    system_default_registry: str | None = None,
    node_name: str | None = None,
    where: str = "rke2",
) -> Rke2Config:
    """Validate and build; errors name the field under `where`."""
    if role not in ROLES:
        raise ValidationError(f"{where}.role", f"{role!r} is not one of {', '.join(ROLES)}")
    if token is not None and token_file is not None:
        raise ValidationError(f"{where}.token", "give token or token-file, not both")
    if token is not None and not token.strip():
        raise ValidationError(f"{where}.token", "is empty")
    if role == "agent":
        if server is None:
            raise ValidationError(f"{where}.server", "an agent needs the server it joins")
        if token is None and token_file is None:
            raise ValidationError(f"{where}.token", "an agent needs token or token-file to join")
    if server is not None:
        server = _host(server, f"{where}.server")
    for i, name in enumerate(tls_san):
        _host(name, f"{where}.tls-san[{i}]")
    labels = dict(node_labels or {})
    for key, value in labels.items():
        _label(key, str(value), f"{where}.node-label.{key}")
    for i, taint in enumerate(node_taints):
        _taint(taint, f"{where}.node-taint[{i}]")
    if system_default_registry is not None:
        _registry(system_default_registry, f"{where}.system-default-registry")
    if not _MODE.match(write_kubeconfig_mode):
        raise ValidationError(f"{where}.write-kubeconfig-mode", f"{write_kubeconfig_mode!r} is not an octal mode")
    return Rke2Config(
        role,
        token,
        token_file,
        server,
        tuple(tls_san),
        {k: str(v) for k, v in labels.items()},
        tuple(node_taints),
        tuple(kubelet_args),
        write_kubeconfig_mode.rjust(4, "0"),
        node_ip,
        system_default_registry,
        node_name,
    )


def registries_config(
    registry: str, *, mirror_docker_io: bool = True, scheme: str = "http", ca_file: str | None = None
) -> dict[str, Any]:
    """registries.yaml values: the lab registry (host:port) serves itself and, optionally, docker.io;
    with `ca_file`, containerd trusts that CA for it (the cluster CA signs the lab registry's certificate)."""
    _registry(registry, "registry")
    if scheme not in ("http", "https"):
        raise ValidationError("registry.scheme", f"{scheme!r} is not http or https")
    endpoint = f"{scheme}://{registry}"
    mirrors = {registry: [endpoint]}
    if mirror_docker_io:
        mirrors = {"docker.io": [endpoint], **mirrors}
    if ca_file is None:
        return {"mirrors": mirrors, "configs": {}}
    if not ca_file.startswith("/"):
        raise ValidationError("registry.ca_file", f"{ca_file!r} is not an absolute path")
    return {"mirrors": mirrors, "configs": {registry: {"ca_file": ca_file}}}


def _registry(registry: str, where: str) -> None:
    if "://" in registry:
        raise ValidationError(where, f"{registry!r}: give host[:port], not a URL")
    host, _, port = registry.partition(":")
    _host(host, where)
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValidationError(where, f"{registry!r} has a bad port")


def _host(value: str, where: str) -> str:
    host = value.removeprefix("https://").removeprefix("http://")
    if host != value:
        raise ValidationError(where, f"{value!r}: give a host name or address, not a URL")
    if not host or not _HOST.match(host):
        raise ValidationError(where, f"{value!r} is not a host name or address")
    return host


def _label(key: str, value: str, where: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if (slash and not _PREFIX.match(prefix)) or len(prefix) > 253 or not _NAME.match(name):
        raise ValidationError(where, f"{key!r} is not a valid label key")
    if value and not _NAME.match(value):
        raise ValidationError(where, f"{value!r} is not a valid label value (≤ 63 of [A-Za-z0-9_.-])")


def _taint(taint: str, where: str) -> None:
    body, colon, effect = taint.rpartition(":")
    if not colon or effect not in TAINT_EFFECTS:
        raise ValidationError(
            where, f"{taint!r}: expected key[=value]:Effect with Effect in {', '.join(TAINT_EFFECTS)}"
        )
    key, _, value = body.partition("=")
    _label(key, value, where)
