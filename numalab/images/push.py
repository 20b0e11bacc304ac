"""A registry HTTP API v2 client over TLS, enough to push a built image and read it back.

Pushes are idempotent: a blob the registry already has (HEAD) is not sent again, and a tag that
already names the same manifest digest is not rewritten. `resolve` connects to another address
than the registry's name (the controller reaches `registry:5000` by the guest's IP) while SNI, the
Host header and the certificate check still use the name.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from numalab.images.oci import MANIFEST_MEDIA_TYPE, Image, sha256_digest

TIMEOUT_SECONDS = 60.0


class RegistryError(RuntimeError):
    """A registry request failed; the message names the registry, repository, step and HTTP answer."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass(frozen=True)
class PushedImage:
    """What a push did: the manifest digest now under repository:tag and how many blobs were sent."""

    registry: str
    repository: str
    tag: str
    digest: str
    blobs_uploaded: int
    blobs_present: int
    manifest_uploaded: bool

    @property
    def reference(self) -> str:
        """What a pod spec or containerd config names: registry/repository:tag."""
        return f"{self.registry}/{self.repository}:{self.tag}"

    def summary(self) -> str:
        if self.blobs_uploaded or self.manifest_uploaded:
            done = f"uploaded {self.blobs_uploaded} blobs ({self.blobs_present} already present)"
        else:
            done = "already present"
        return f"{self.repository}:{self.tag} {self.digest} {done}"


class _ResolvedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to `address` while SNI, Host and the certificate check use the connection's host name."""

    def __init__(self, host: str, port: int, address: str, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        try:
            self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


class RegistryClient:
    """Requests to one registry `host:port` over TLS verified with `ca_file` (system CAs when None)."""

    def __init__(self, registry: str, ca_file: Path | None = None, resolve: str | None = None,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self.registry = registry
        self.host, self.port = _split_registry(registry)
        self.address = _resolved_address(self.host, resolve)
        if ca_file is not None and not Path(ca_file).is_file():
            raise RegistryError(f"registry {registry}: CA file {ca_file} does not exist")
        self._context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        self._timeout = timeout

    @property
    def where(self) -> str:
        return self.registry if self.address == self.host else f"{self.registry} (at {self.address})"

    def request(self, method: str, path: str, step: str, repository: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Response:
        """One request on a fresh connection; network and TLS failures become a RegistryError for `step`."""
        connection = _ResolvedHTTPSConnection(self.host, self.port, self.address, self._context, self._timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            answer = connection.getresponse()
            payload = answer.read()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, payload)
        except ssl.SSLCertVerificationError as exc:
            raise RegistryError(
                f"registry {self.where}, {repository}, {step}: TLS verification failed: {exc.verify_message}; "
                "is --ca the CA that signed the registry's certificate, and is the name in its SAN?"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise RegistryError(
                f"registry {self.where}, {repository}, {step}: cannot reach it: {exc or type(exc).__name__}"
            ) from None
        finally:
            connection.close()

    def expect(self, response: Response, ok: tuple[int, ...], step: str, repository: str) -> Response:
        if response.status not in ok:
            body = response.body.decode(errors="replace").strip()[:500]
            expected = "/".join(str(code) for code in ok)
            raise RegistryError(
                f"registry {self.where}, {repository}, {step}: HTTP {response.status} (expected {expected}): {body}"
            )
        return response

    def blob_exists(self, repository: str, digest: str) -> bool:
        step = f"HEAD blob {digest}"
        response = self.request("HEAD", f"/v2/{repository}/blobs/{digest}", step, repository)
        return self.expect(response, (200, 404), step, repository).status == 200

    def upload_blob(self, repository: str, digest: str, data: bytes) -> None:
        """A monolithic upload: POST opens an upload session, PUT <location>?digest= sends the whole blob."""
        step = f"start upload of {digest}"
        started = self.expect(self.request("POST", f"/v2/{repository}/blobs/uploads/", step, repository,
                                           headers={"Content-Length": "0"}), (202,), step, repository)
        location = started.header("Location")
        if not location:
            raise RegistryError(f"registry {self.where}, {repository}, {step}: HTTP 202 without a Location header")
        target = urlsplit(location)
        query = f"{target.query}&digest={digest}" if target.query else f"digest={digest}"
        step = f"PUT blob {digest} ({len(data)} bytes)"
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
        response = self.request("PUT", f"{target.path}?{query}", step, repository, body=data, headers=headers)
        self.expect(response, (201,), step, repository)

    def get_blob(self, repository: str, digest: str) -> bytes:
        step = f"GET blob {digest}"
        response = self.expect(self.request("GET", f"/v2/{repository}/blobs/{digest}", step, repository),
                               (200,), step, repository)
        if sha256_digest(response.body) != digest:
            raise RegistryError(f"registry {self.where}, {repository}, {step}: content has digest "
                                f"{sha256_digest(response.body)}")
        return response.body

    def manifest_digest(self, repository: str, reference: str) -> str | None:
        """The digest `reference` (a tag or digest) names, or None when the registry has no such manifest."""
        step = f"HEAD manifest {reference}"
        response = self.request("HEAD", f"/v2/{repository}/manifests/{reference}", step, repository,
                                headers={"Accept": MANIFEST_MEDIA_TYPE})
        if self.expect(response, (200, 404), step, repository).status == 404:
            return None
        return response.header("Docker-Content-Digest") or None

    def get_manifest(self, repository: str, reference: str) -> Response:
        step = f"GET manifest {reference}"
        response = self.request("GET", f"/v2/{repository}/manifests/{reference}", step, repository,
                                headers={"Accept": MANIFEST_MEDIA_TYPE})
        return self.expect(response, (200,), step, repository)

    def put_manifest(self, repository: str, tag: str, manifest: bytes) -> str:
        step = f"PUT manifest {tag}"
        headers = {"Content-Type": MANIFEST_MEDIA_TYPE, "Content-Length": str(len(manifest))}
        response = self.request("PUT", f"/v2/{repository}/manifests/{tag}", step, repository, manifest, headers)
        return self.expect(response, (201,), step, repository).header("Docker-Content-Digest")


def push_image(client: RegistryClient, repository: str, tag: str, image: Image) -> PushedImage:
    """Send the blobs the registry lacks, tag the manifest unless the tag already names it, verify by GET."""
    uploaded = present = 0
    for digest, data in image.blobs.items():
        if client.blob_exists(repository, digest):
            present += 1
            continue
        client.upload_blob(repository, digest, data)
        uploaded += 1
    manifest_uploaded = client.manifest_digest(repository, tag) != image.digest
    if manifest_uploaded:
        answered = client.put_manifest(repository, tag, image.manifest)
        if answered and answered != image.digest:
            raise RegistryError(f"registry {client.where}, {repository}, PUT manifest {tag}: registry computed "
                                f"digest {answered}, built {image.digest}")
    _verify(client, repository, tag, image)
    return PushedImage(client.registry, repository, tag, image.digest, uploaded, present, manifest_uploaded)


def _verify(client: RegistryClient, repository: str, tag: str, image: Image) -> None:
    step = f"verify {tag}"
    by_digest = client.get_manifest(repository, image.digest)
    served = by_digest.header("Docker-Content-Digest")
    if served != image.digest or by_digest.body != image.manifest:
        raise RegistryError(f"registry {client.where}, {repository}, {step}: GET {image.digest} answered digest "
                            f"{served or '(none)'} with {len(by_digest.body)} bytes; expected the pushed manifest")
    tagged = client.manifest_digest(repository, tag)
    if tagged != image.digest:
        raise RegistryError(f"registry {client.where}, {repository}, {step}: tag {tag} names {tagged}, "
                            f"expected {image.digest}")


def _split_registry(registry: str) -> tuple[str, int]:
    host, sep, port = registry.rpartition(":")
    if not sep or not host or not port.isdigit() or "/" in registry:
        raise RegistryError(f"registry {registry!r}: expected HOST:PORT, e.g. registry:5000")
    return host, int(port)


def _resolved_address(host: str, resolve: str | None) -> str:
    """`resolve` is HOST:ADDRESS like curl's --resolve without the port; HOST must be the registry's."""
    if not resolve:
        return host
    name, sep, address = resolve.partition(":")
    if not sep or not address:
        raise RegistryError(f"--resolve {resolve!r}: expected HOST:ADDRESS, e.g. registry:192.168.122.10")
    if name != host:
        raise RegistryError(f"--resolve {resolve!r}: names host {name!r} but the registry is {host!r}")
    return address.strip("[]")
