"""How RKE2 gets onto a node (host data `rke2_install`, `rke2_version`, `rke2_artifacts_dir`,
`rke2_release_url`) and the release's artifact set, checked before any host is touched.

One install path for every method that installs: the release tarball (and, for airgap, the images
archive) is staged on the node, checked against the release's sha256 sums file there, and only then
installed the way RKE2's install script does with INSTALL_RKE2_ARTIFACT_PATH: images archives into
/var/lib/rancher/rke2/agent/images/, the tarball extracted into /usr/local. `online` downloads the stage
on the node, `airgap` uploads it from the controller, `preinstalled` installs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from numalab.model.errors import ValidationError

INSTALLS = ("online", "airgap", "preinstalled")
ARCH = "amd64"
TARBALL = f"rke2.linux-{ARCH}.tar.gz"
IMAGES = (f"rke2-images.linux-{ARCH}.tar.zst", f"rke2-images.linux-{ARCH}.tar.gz")
SUMS = f"sha256sum-{ARCH}.txt"
RELEASES_URL = "https://github.com/rancher/rke2/releases/download"

TAR_PREFIX = "/usr/local"
BINARY = f"{TAR_PREFIX}/bin/rke2"
IMAGES_DIR = "/var/lib/rancher/rke2/agent/images"
STAGE_DIR = "/var/lib/numa-lab/rke2-artifacts"
# Written after a successful install: the tarball's sha256, so a second run installs nothing.
INSTALLED_MARKER = "/var/lib/numa-lab/rke2-installed.sha256"

_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\+rke2r(\d+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Rke2Install:
    method: str
    version: str
    artifacts_dir: str | None = None
    release_url: str = RELEASES_URL

    @property
    def kubelet_version(self) -> str:
        """The Kubernetes release an RKE2 version ships: v1.31.4+rke2r1 -> v1.31.4."""
        return self.version.partition("+")[0]

    @property
    def download_base(self) -> str:
        """Where `online` fetches the tarball and sums file (the version's `+` URL-encoded, as GitHub needs)."""
        return f"{self.release_url.rstrip('/')}/{quote(self.version, safe='')}"


def rke2_install_from_data(data: Mapping[str, Any], where: str) -> Rke2Install:
    """Validate the install keys of one host's data; errors name `where.key`."""
    method = data.get("rke2_install") or "online"
    if method not in INSTALLS:
        raise ValidationError(f"{where}.rke2_install", f"{method!r} is not one of {', '.join(INSTALLS)}")
    version = data.get("rke2_version")
    if not version:
        raise ValidationError(f"{where}.rke2_version", "is required (pin a release such as v1.31.4+rke2r1)")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise ValidationError(f"{where}.rke2_version", f"{version!r} is not an RKE2 release (vX.Y.Z+rke2rN)")
    artifacts = data.get("rke2_artifacts_dir")
    if method == "airgap" and not artifacts:
        raise ValidationError(f"{where}.rke2_artifacts_dir", f"rke2_install airgap needs the directory holding "
                              f"{TARBALL}, {IMAGES[0]} (or .tar.gz) and {SUMS}")
    if method != "airgap" and artifacts:
        raise ValidationError(f"{where}.rke2_artifacts_dir", f"is only read with rke2_install airgap, not {method}")
    url = data.get("rke2_release_url") or RELEASES_URL
    if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url):
        raise ValidationError(f"{where}.rke2_release_url", f"{url!r} is not an http(s) URL")
    return Rke2Install(method, version, str(artifacts) if artifacts else None, url)


def parse_sums(text: str, where: str = SUMS) -> dict[str, str]:
    """`sha256sum` output (`HEX  NAME` or `HEX *NAME`) -> {file name: hex}; a malformed line is an error."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.strip().partition(" ")
        name = name.strip().lstrip("*")
        if not _SHA256.match(digest.lower()) or not name:
            raise ValidationError(f"{where}:{number}", f"{line.strip()!r} is not `SHA256  FILE`")
        sums[name.rsplit("/", 1)[-1]] = digest.lower()
    return sums


def expected_sum(sums: Mapping[str, str], name: str, where: str = SUMS) -> str:
    if name not in sums:
        raise ValidationError(where, f"has no sum for {name}")
    return sums[name]


def rewrite_kubeconfig_server(kubeconfig: Mapping[str, Any], address: str) -> dict[str, Any]:
    """RKE2's rke2.yaml names https://127.0.0.1:6443; the controller reaches the server at `address`."""
    clusters = []
    for entry in kubeconfig.get("clusters") or []:
        cluster = dict(entry.get("cluster") or {})
        server = cluster.get("server", "")
        scheme, _, rest = server.partition("://")
        authority = rest.split("/", 1)[0]
        tail = authority.rsplit("]", 1)[-1]  # after an IPv6 literal's brackets, if any
        port = tail.rpartition(":")[2] if ":" in tail else "6443"
        cluster["server"] = f"{scheme or 'https'}://{address}:{port}"
        clusters.append({**entry, "cluster": cluster})
    if not clusters:
        raise ValidationError("rke2.yaml.clusters", "has no cluster to point at the server")
    return {**kubeconfig, "clusters": clusters}
