"""Stage `registry`: Debian's docker-registry with TLS from the cluster CA, holding the lab's images.

The images (the pause image, the e2e probe and CoreDNS) are built on the controller and pushed through the
registry's HTTP API: no container engine anywhere. Skipped when the inventory has no registry host.
"""

from __future__ import annotations

import socket
import time
from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files, python

from numalab.deploy import context, controller
from numalab.deploy.operations import secret_file
from numalab.deploy.policy import kubelet_version
from numalab.deploy.services import running_and_current
from numalab.images.lab_images import lab_images, push_lab_images
from numalab.images.push import RegistryClient, RegistryError
from numalab.progress import say
from numalab.render import render

CONFIG_DIR = "/etc/docker/registry"
REGISTRY_USER = "docker-registry"  # Debian's package runs the service as this user


def images_missing(registry: str, address: str) -> list[str]:
    """Lab images the registry lacks, asked from the controller (all of them while it is not up)."""
    ca = controller.pki(host).path("ca.crt")
    images = lab_images(kubelet_version())
    try:
        client = RegistryClient(registry, ca, resolve=f"{registry.split(':')[0]}:{address}", timeout=5)
        return [image.name for image in images if client.manifest_digest(image.repository, image.tag) is None]
    except (RegistryError, OSError):
        return [image.name for image in images]


def _wait_for_port(address: str, port: int, timeout: float = 120.0) -> None:
    """docker-registry takes seconds to listen after its (re)start under emulation; pushing earlier fails."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=5):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"registry at {address}:{port} not listening after {timeout:.0f} s ({exc}); "
                                   "see `journalctl -u docker-registry` on the registry host") from None
            time.sleep(2)


def _push(registry: str, address: str) -> None:
    _wait_for_port(address, int(registry.split(":")[1]))
    ca = controller.pki(host).path("ca.crt")
    resolve = f"{registry.split(':')[0]}:{address}"
    for pushed in push_lab_images(registry, ca, resolve=resolve, version=kubelet_version()):
        say(f"registry {registry}: {pushed.summary()}")


@deploy("registry")
def registry() -> None:
    """docker-registry on :5000 serving the lab images over TLS (cert for the name `registry`)."""
    cluster = context.cluster_of(host)
    assert cluster.registry is not None and cluster.registry_endpoint is not None
    pki = controller.pki(host)
    cert = files.put(
        name="Registry certificate", src=StringIO(pki.read("registry.crt").decode()),
        dest=f"{CONFIG_DIR}/registry.crt", mode="644",
    )
    key = secret_file(
        name="Registry key", content=pki.read("registry.key"), dest=f"{CONFIG_DIR}/registry.key",
        user=REGISTRY_USER, group=REGISTRY_USER,
    )
    config = files.put(
        name="Registry config (TLS, storage)",
        src=StringIO(render("k8s/registry-config.yml.j2", port=cluster.registry_endpoint.split(":")[1],
                            cert=f"{CONFIG_DIR}/registry.crt", key=f"{CONFIG_DIR}/registry.key")),
        dest=f"{CONFIG_DIR}/config.yml", mode="644",
    )
    running_and_current("docker-registry", "docker-registry enabled and running",
                        "Restart docker-registry for its new config", [cert, key, config])
    missing = images_missing(cluster.registry_endpoint, str(cluster.registry.address))
    if missing:
        python.call(
            name=f"Push {', '.join(missing)} from the controller", function=_push,
            registry=cluster.registry_endpoint, address=str(cluster.registry.address),
        )
    else:
        host.noop("the lab images are already in the registry")
