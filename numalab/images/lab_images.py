"""The images the lab cluster pulls from its registry: their names, tags and how each is built.

- numa-lab/pause:<TAG>: the sandbox image, pause.c of the pinned k8s.io/kubernetes module compiled
  statically the way build/pause/Makefile does (TAG and CFLAGS read from that Makefile).
- numa-lab/probe:1: Debian's static busybox with all its applets linked into /bin, enough for
  e2e/probe.sh, which e2e/probe_pods.py runs as `sh -c <script>` as user 65534.
- numa-lab/coredns:<VERSION>: the cluster DNS, CoreDNS built from the Go module proxy with the lab's
  plugins (numalab/k8s/coredns.py) and cached; built only when pushed (a cold build takes minutes).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numalab.images.numa_align_image import build_plugin_image, plugin_image_tag
from numalab.images.oci import Entry, Image, RuntimeConfig, build_image
from numalab.images.push import PushedImage, RegistryClient, push_image
from numalab.k8s.coredns import COREDNS_VERSION, coredns_binary
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import kubernetes_module_dir
from numalab.k8s.versions import KUBERNETES_MODULE, KUBERNETES_VERSION

PAUSE_REPOSITORY = "numa-lab/pause"
PROBE_REPOSITORY = "numa-lab/probe"
PROBE_TAG = "1"
COREDNS_REPOSITORY = "numa-lab/coredns"
NUMA_ALIGN_REPOSITORY = "numa-lab/numa-align"
COREDNS_TAG = COREDNS_VERSION.removeprefix("v")
COREDNS_USER = "0:0"
"""Root, as CoreDNS's own image; the lab's Deployment drops every capability but NET_BIND_SERVICE."""
BUSYBOX = Path("/bin/busybox")
"""From Debian's busybox-static package (scripts/host-prep.sh installs it)."""
PAUSE_USER = "65535:65535"
"""Upstream's pause image runs as 65535:65535 (build/pause/Dockerfile)."""
PROBE_USER = "65534:65534"
"""nobody; e2e/probe_pods.py sets runAsUser 65534 and runAsNonRoot itself, this only matches it."""

_MAKE_TAG = re.compile(r"^TAG\s*\?=\s*(\S+)\s*$", re.MULTILINE)
_MAKE_CFLAGS = re.compile(r"^CFLAGS\s*=\s*(.+?)\s*$", re.MULTILINE)


class ImageBuildError(RuntimeError):
    """An image could not be built: a missing tool or source, or a compiler failure."""


@dataclass(frozen=True)
class LabImage:
    """An image the lab pushes: repository, tag and a builder (called only when the image is pushed)."""

    key: str
    repository: str
    tag: str
    build: Callable[[], Image]

    @property
    def name(self) -> str:
        return f"{self.repository}:{self.tag}"


def lab_images(version: str = KUBERNETES_VERSION) -> list[LabImage]:
    """The pause, probe, coredns and numa-align images for Kubernetes `version` (downloads the Go module to
    read the pause TAG); nothing is built until an image's `build` is called."""
    makefile = pause_makefile(version)
    return [
        LabImage("pause", PAUSE_REPOSITORY, pause_tag(makefile), lambda: build_pause(version)),
        LabImage("probe", PROBE_REPOSITORY, PROBE_TAG, build_probe),
        LabImage("coredns", COREDNS_REPOSITORY, COREDNS_TAG, build_coredns),
        LabImage("numa-align", NUMA_ALIGN_REPOSITORY, plugin_image_tag(), build_plugin_image),
    ]


def lab_image_reference(registry: str, key: str, version: str = KUBERNETES_VERSION) -> str:
    """`registry/repository@sha256:...`: the lab image `key` pinned by digest (built, or read from its cache)."""
    (image,) = select_images(lab_images(version), [key])
    return f"{registry}/{image.repository}@{image.build().digest}"


def select_images(images: list[LabImage], wanted: list[str]) -> list[LabImage]:
    """The images `wanted` names by key (pause), repository (numa-lab/pause) or name (numa-lab/pause:3.10.2)."""
    if not wanted:
        return images
    chosen = []
    for word in wanted:
        match = [image for image in images if word in (image.key, image.repository, image.name)]
        if not match:
            known = ", ".join(f"{image.key} ({image.name})" for image in images)
            raise LookupError(f"image {word!r} is not a lab image; expected one of {known}")
        chosen += [image for image in match if image not in chosen]
    return chosen


def push_lab_images(registry: str, ca_file: Path | None, resolve: str | None = None,
                    version: str = KUBERNETES_VERSION, only: list[str] | None = None) -> list[PushedImage]:
    """Build the lab images (all, or those `only` names) and push them to `registry` (HOST:PORT)."""
    client = RegistryClient(registry, ca_file, resolve)
    chosen = select_images(lab_images(version), only or [])
    return [push_image(client, image.repository, image.tag, image.build()) for image in chosen]


def pause_makefile(version: str) -> Path:
    return kubernetes_module_dir(version) / "build" / "pause" / "Makefile"


def pause_tag(makefile: Path) -> str:
    """The `TAG ?= x` of build/pause/Makefile: the version upstream publishes registry.k8s.io/pause as."""
    match = _MAKE_TAG.search(makefile.read_text())
    if not match:
        raise ImageBuildError(f"{makefile}: no `TAG ?= <version>` line; has the pause Makefile changed shape?")
    return match.group(1)


def pause_cflags(makefile: Path, rev: str) -> list[str]:
    """The Makefile's CFLAGS with $(TAG) and $(REV) filled in.

    REV is `git describe --contains` upstream; a module has no .git, so the release version stands in.
    """
    match = _MAKE_CFLAGS.search(makefile.read_text())
    if not match:
        raise ImageBuildError(f"{makefile}: no `CFLAGS = ...` line; has the pause Makefile changed shape?")
    text = match.group(1).replace("$(TAG)", pause_tag(makefile)).replace("$(REV)", rev)
    if "$(" in text:
        raise ImageBuildError(f"{makefile}: CFLAGS {match.group(1)!r} uses a variable other than TAG and REV")
    return text.split()


def build_pause(version: str = KUBERNETES_VERSION) -> Image:
    """numa-lab/pause: build/pause/linux/pause.c compiled with gcc -static and stripped, alone at /pause."""
    module = kubernetes_module_dir(version)
    makefile = module / "build" / "pause" / "Makefile"
    source = module / "build" / "pause" / "linux" / "pause.c"
    with tempfile.TemporaryDirectory(prefix="numalab-pause-") as work:
        # Compile a copy by a relative name so no path of this machine ends up in the binary.
        (Path(work) / "pause.c").write_bytes(source.read_bytes())
        _run(["gcc", *pause_cflags(makefile, version), "-o", "pause", "pause.c"], work)
        _run(["strip", "pause"], work)
        binary = (Path(work) / "pause").read_bytes()
    return build_image(
        [Entry.file("pause", binary, 0o755)],
        RuntimeConfig(entrypoint=("/pause",), user=PAUSE_USER),
        f"numalab: build/pause/linux/pause.c of {KUBERNETES_MODULE}@{version}, gcc -static",
    )


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    """The applet names `busybox --list` prints (sh, grep, cat, sleep, ...), without busybox itself."""
    done = _run([str(busybox), "--list"], None)
    return sorted({name for name in done.split() if name != "busybox" and "/" not in name})


def build_probe(busybox: Path = BUSYBOX) -> Image:
    """numa-lab/probe: /bin/busybox with every applet a symlink beside it; default command `sh`."""
    if not busybox.is_file():
        raise ImageBuildError(f"{busybox} not found: install Debian's busybox-static (scripts/host-prep.sh does)")
    entries = [Entry.directory(name) for name in ("bin", "etc", "proc", "sys", "dev")]
    entries += [Entry.directory("tmp", 0o1777), Entry.file("bin/busybox", busybox.read_bytes(), 0o755)]
    entries += [Entry.symlink(f"bin/{name}", "busybox") for name in busybox_applets(busybox)]
    entries += [
        Entry.file("etc/passwd", b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"),
        Entry.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n"),
    ]
    return build_image(
        entries,
        RuntimeConfig(cmd=("sh",), user=PROBE_USER, env=("PATH=/bin",)),
        f"numalab: {busybox} of Debian's busybox-static with its applets linked in /bin",
    )


def build_coredns(binary: Path | None = None) -> Image:
    """numa-lab/coredns: the CoreDNS binary (built and cached when not given) at /coredns, run with the
    Corefile the Deployment mounts at /etc/coredns."""
    if binary is None:
        try:
            binary = coredns_binary()
        except BinariesError as exc:
            raise ImageBuildError(str(exc)) from None
    entries = [
        Entry.file("coredns", binary.read_bytes(), 0o755),
        Entry.directory("etc"),
        Entry.file("etc/passwd", b"root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n"),
        Entry.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n"),
    ]
    return build_image(
        entries,
        RuntimeConfig(entrypoint=("/coredns",), cmd=("-conf", "/etc/coredns/Corefile"), user=COREDNS_USER),
        f"numalab: CoreDNS {COREDNS_VERSION} built from the Go module proxy with the lab's plugins",
    )


def _run(argv: list[str], cwd: str | None) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise ImageBuildError(f"`{argv[0]}` not found: building the lab images needs gcc and binutils") from None
    if done.returncode != 0:
        raise ImageBuildError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout
