"""Single-layer OCI images built in memory: a layer tar, its gzip, a config and a manifest.

No container engine exists in the lab, so an image is assembled from files here. The build is
deterministic (sorted entries, mtime 0, uid/gid 0, gzip mtime 0, canonical JSON), so the same inputs
give the same digests and a second push finds every blob already present.

The manifest is an OCI image manifest (application/vnd.oci.image.manifest.v1+json): containerd 1.7
resolves it natively and docker-registry 2.8 (distribution's `ocischema`) stores and serves it; Docker
schema 2 would work too, OCI is the format both sides document as their own.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sha256_digest(data: bytes) -> str:
    """The content address of a blob: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One path in a layer: a regular file (data), a directory or a symlink (target)."""

    path: str
    kind: str = "file"
    data: bytes = b""
    mode: int = 0o644
    target: str = ""

    @classmethod
    def file(cls, path: str, data: bytes, mode: int = 0o644) -> Entry:
        return cls(path, "file", data, mode)

    @classmethod
    def directory(cls, path: str, mode: int = 0o755) -> Entry:
        return cls(path, "dir", mode=mode)

    @classmethod
    def symlink(cls, path: str, target: str) -> Entry:
        return cls(path, "symlink", mode=0o777, target=target)


@dataclass(frozen=True)
class RuntimeConfig:
    """The `config` part of an image config: what a container runs by default and as whom."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    user: str = ""
    env: tuple[str, ...] = (DEFAULT_PATH,)

    def as_json(self) -> dict[str, object]:
        fields: dict[str, object] = {"Env": list(self.env)}
        if self.entrypoint:
            fields["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            fields["Cmd"] = list(self.cmd)
        if self.user:
            fields["User"] = self.user
        return fields


@dataclass(frozen=True)
class Image:
    """A built image: its blobs by digest and the manifest that names them."""

    manifest: bytes
    config: bytes
    layer: bytes
    diff_id: str
    blobs: dict[str, bytes] = field(repr=False)

    @property
    def digest(self) -> str:
        return sha256_digest(self.manifest)

    @property
    def config_digest(self) -> str:
        return sha256_digest(self.config)

    @property
    def layer_digest(self) -> str:
        return sha256_digest(self.layer)


def layer_tar(entries: Iterable[Entry]) -> bytes:
    """An uncompressed layer: entries sorted by path, parents first, owned by 0:0 with mtime 0."""
    by_path: dict[str, Entry] = {}
    for entry in entries:
        path = entry.path.strip("/")
        if not path or ".." in path.split("/"):
            raise ValueError(f"layer entry path {entry.path!r} must be a relative path inside the image")
        if path in by_path:
            raise ValueError(f"layer entry {path!r} is given twice")
        by_path[path] = entry
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(by_path):
            tar.addfile(*_tar_member(path, by_path[path]))
    return buffer.getvalue()


def _tar_member(path: str, entry: Entry) -> tuple[tarfile.TarInfo, io.BytesIO | None]:
    info = tarfile.TarInfo(path)
    info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = entry.mode, 0, 0, 0, "root", "root"
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        return info, None
    if entry.kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, entry.target
        return info, None
    if entry.kind != "file":
        raise ValueError(f"layer entry {path!r} has kind {entry.kind!r}; expected file, dir or symlink")
    info.size = len(entry.data)
    return info, io.BytesIO(entry.data)


def build_image(entries: Iterable[Entry], runtime: RuntimeConfig, created_by: str) -> Image:
    """A linux/amd64 image of one layer holding `entries`; `created_by` is recorded in its history."""
    tar = layer_tar(entries)
    layer = gzip.compress(tar, compresslevel=9, mtime=0)
    diff_id = sha256_digest(tar)
    config = _canonical_json({
        "architecture": "amd64",
        "os": "linux",
        "config": runtime.as_json(),
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": created_by}],
    })
    manifest = _canonical_json({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": sha256_digest(layer), "size": len(layer)}],
    })
    blobs = {sha256_digest(layer): layer, sha256_digest(config): config}
    return Image(manifest=manifest, config=config, layer=layer, diff_id=diff_id, blobs=blobs)


def _canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
