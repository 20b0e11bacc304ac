"""The lab's storage pool and its volumes: base image, kernel and initrd, per-guest overlays and seeds.

Files reach the pool through libvirt streams, so a remote libvirt host needs no other copy channel. The
pool is the lab's only by its name and path: one found at another path is never touched.
"""

from __future__ import annotations

import json
import logging
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from numalab.lab.errors import LabError
from numalab.lab.image import Image
from numalab.lab.libvirt_objects import lookup_or_none
from numalab.render import render

log = logging.getLogger(__name__)

POOL_ROOT = "/var/lib/libvirt/images"
UPLOAD_CHUNK = 1 << 20


def ensure_pool(conn: libvirt.virConnect, name: str, path: str, lab_name: str) -> libvirt.virStoragePool:
    """Pool `name` at `path` is defined, built and active."""
    pool = lookup_or_none(conn.storagePoolLookupByName, name)
    if pool is None:
        pool = conn.storagePoolDefineXML(render("lab/pool.xml.j2", name=name, path=path))
        pool.build(0)
    else:
        require_owned_pool(pool, path, lab_name)
    if not pool.isActive():
        pool.create(0)
    return pool


def require_owned_pool(pool: libvirt.virStoragePool, path: str, lab_name: str) -> None:
    found = ET.fromstring(pool.XMLDesc()).findtext("./target/path")
    if found != path:
        raise LabError(
            f"storage pool {pool.name()} exists at {found}, not at {path}: it is not lab "
            f"{lab_name}'s; refusing to touch it"
        )


def remove_pool(conn: libvirt.virConnect, name: str, path: str, lab_name: str) -> list[str]:
    """Delete pool `name` (only at `path`) with all its volumes; what was removed."""
    pool = lookup_or_none(conn.storagePoolLookupByName, name)
    if pool is None:
        return []
    require_owned_pool(pool, path, lab_name)
    if not pool.isActive():
        pool.create(0)
    pool.refresh(0)
    removed = []
    for vol in pool.listAllVolumes(0):
        vol.delete(0)
        removed.append(f"volume {vol.name()}")
    pool.destroy()
    pool.delete(0)
    pool.undefine()
    removed.append(f"pool {name}")
    return removed


def image_volumes(image: Image) -> dict[str, Path]:
    """Volume name -> local file for the base disk (and kernel/initrd for direct boot)."""
    tag = image.tag
    volumes = {f"base-{tag}.qcow2": image.disk}
    if image.kernel is not None and image.initrd is not None:
        volumes[f"vmlinuz-{tag}"] = image.kernel
        volumes[f"initrd-{tag}.img"] = image.initrd
    return volumes


def upload_image(conn: libvirt.virConnect, pool_name: str, image: Image) -> None:
    """The image's volumes that the pool lacks are uploaded; present ones are kept."""
    pool = conn.storagePoolLookupByName(pool_name)
    pool.refresh(0)
    for name, path in image_volumes(image).items():
        if lookup_or_none(pool.storageVolLookupByName, name) is None:
            upload(conn, pool, name, path)


def upload(conn: libvirt.virConnect, pool: libvirt.virStoragePool, name: str, path: Path) -> None:
    """Local file `path` becomes raw volume `name` of `pool`; a failed upload leaves no volume."""
    size = path.stat().st_size
    log.info("uploading %s (%d MiB) into pool %s", name, size >> 20, pool.name())
    vol = pool.createXML(render("lab/volume.xml.j2", name=name, capacity=size, format="raw", backing_path=None))
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with path.open("rb") as source:
            stream.sendAll(lambda _stream, nbytes, fh: fh.read(min(nbytes, UPLOAD_CHUNK)), source)
        stream.finish()
    except BaseException:
        stream.abort()
        vol.delete(0)
        raise


def ensure_overlay(pool: libvirt.virStoragePool, name: str, image: Image) -> None:
    """Volume `name` exists: a qcow2 overlay on the image's base volume, as large as the base disk."""
    if lookup_or_none(pool.storageVolLookupByName, name) is not None:
        return
    base = pool.storageVolLookupByName(f"base-{image.tag}.qcow2")
    xml = render(
        "lab/volume.xml.j2",
        name=name,
        capacity=_virtual_size(image.disk),
        format="qcow2",
        backing_path=base.path(),
    )
    pool.createXML(xml, 0)


def _virtual_size(disk: Path) -> int:
    out = subprocess.run(
        ["qemu-img", "info", "--output=json", str(disk)], capture_output=True, text=True, check=True
    )
    return int(json.loads(out.stdout)["virtual-size"])
