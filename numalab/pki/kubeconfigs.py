"""Kubeconfig text with the CA, client certificate and key embedded, so one file is the whole credential."""

from __future__ import annotations

import base64

import yaml

from numalab.model.errors import ValidationError


def kubeconfig(server_url: str, ca: bytes, cert: bytes, key: bytes, user: str, cluster: str = "kubernetes") -> str:
    """A kubeconfig for `user` at `server_url`; `ca`, `cert`, `key` are PEM bytes. The same inputs give the same text.

    The result holds a private key: write it 0600 and never log it.
    """
    if not server_url.startswith("https://"):
        raise ValidationError("server_url", f"expected an https:// URL, got {server_url!r}")
    context = f"{user}@{cluster}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server_url, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1 << 20)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
