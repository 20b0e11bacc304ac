"""A small cloud-style image for the lab tests, built from the lab's own base image without mounting.

Real cloud images cannot be downloaded here, so the tests make one: an MBR disk whose first partition
is FAT with syslinux (the image's own bootloader, started by the MBR code), the base image's kernel and
initrd and a syslinux.cfg, and whose second partition is the base image's ext4 root filesystem, copied
in at its offset with its fstab rewritten by debugfs. Nothing is mounted: mtools writes the FAT image,
`syslinux --install` puts its loader into the unmounted FAT image, sfdisk writes the partition table
into the raw file. Its rootfs is the lab's recipe plus cloud-init (the lab's own image has none), so the
guest is configured by cloud-init from the NoCloud seed, as a stock cloud image would be.

The result is cached like the base image, under NUMALAB_IMAGE_DIR/cloudtest-<digest of the recipe>.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from numalab.files import file_lock
from numalab.lab.image import built_image
from numalab.lab.recipe import CLOUD_INIT_FILES, CLOUD_INIT_PACKAGES, ROOTFS_FILES, Recipe

VERSION = 1
SECTOR = 512
FAT_START_MIB = 1
FAT_SIZE_MIB = 63
ROOT_START_MIB = FAT_START_MIB + FAT_SIZE_MIB
MBR_CODE = Path("/usr/lib/syslinux/mbr/mbr.bin")
DISK = "cloud.qcow2"
# panic=5 as the lab's own guests have it (numalab/lab/image.py): a boot-time panic under emulation reboots
# the guest instead of leaving the SSH wait to time out after 600 s.
KERNEL_CMDLINE = "root=/dev/vda2 rw console=ttyS0 net.ifnames=0 nokaslr panic=5"
SYSLINUX_CFG = (
    "SERIAL 0 115200\n"
    "DEFAULT linux\n"
    "PROMPT 0\n"
    "TIMEOUT 0\n"
    "LABEL linux\n"
    "  LINUX /vmlinuz\n"
    "  INITRD /initrd.img\n"
    f"  APPEND {KERNEL_CMDLINE}\n"
)
FSTAB = "/dev/vda2 / ext4 rw,errors=remount-ro 0 1\n"


def recipe_digest(base: Recipe) -> str:
    text = json.dumps(
        {
            "version": VERSION,
            "base": base.digest(),
            "syslinux_cfg": SYSLINUX_CFG,
            "fstab": FSTAB,
            "layout": [FAT_START_MIB, FAT_SIZE_MIB],
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cloud_init_recipe() -> Recipe:
    """The lab's packages with cloud-init, its NoCloud datasource setting and ifupdown + a DHCP client for the
    network it renders, and none of the lab's boot trims, like a stock cloud image (the first-boot unit stands
    aside where cloud-init is installed)."""
    return Recipe(
        extra_packages=(*CLOUD_INIT_PACKAGES, "ifupdown", "isc-dhcp-client"),
        files={**ROOTFS_FILES, **CLOUD_INIT_FILES},
        masked_units=(),
    )


def cloud_test_image(image_root: Path, base: Recipe | None = None) -> Path:
    """The cached cloud-style qcow2 for `base` (default: the lab's recipe with cloud-init), built first if missing."""
    base = base or cloud_init_recipe()
    digest = recipe_digest(base)
    target = image_root / f"cloudtest-{digest}"
    with file_lock(image_root / f"cloudtest-{digest}.lock"):
        if not (target / DISK).exists():
            source = built_image(base, image_root)
            assert source.kernel is not None and source.initrd is not None
            _build(source.disk, source.kernel, source.initrd, target)
    return target / DISK


def _run(*argv: str | Path, stdin: str | None = None) -> None:
    done = subprocess.run([str(a) for a in argv], input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({done.returncode}): {done.stderr.strip()}")


def _build(base_disk: Path, kernel: Path, initrd: Path, target: Path) -> None:
    work = target.with_name(target.name + ".build")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    # Root partition content: the base image's ext4 filesystem with an fstab for /dev/vda2.
    root = work / "root.raw"
    _run("qemu-img", "convert", "-O", "raw", base_disk, root)
    fstab = work / "fstab"
    fstab.write_text(FSTAB)
    fstab.chmod(0o644)
    _run("debugfs", "-w", "-f", "-", root, stdin=f"cd /etc\nrm fstab\nwrite {fstab} fstab\n")

    # Boot partition: FAT with kernel, initrd, syslinux.cfg and syslinux's loader (all via mtools).
    fat = work / "boot.fat"
    cfg = work / "syslinux.cfg"
    cfg.write_text(SYSLINUX_CFG)
    _run("mkfs.vfat", "-n", "BOOT", "-C", fat, str(FAT_SIZE_MIB * 1024))
    _run("mcopy", "-i", fat, kernel, "::/vmlinuz")
    _run("mcopy", "-i", fat, initrd, "::/initrd.img")
    _run("mcopy", "-i", fat, cfg, "::/syslinux.cfg")
    _run("syslinux", "--install", fat)

    # The disk: partition table, MBR boot code, both partitions at their offsets.
    root_sectors = root.stat().st_size // SECTOR
    disk = work / "disk.raw"
    with disk.open("wb") as fh:
        fh.truncate(ROOT_START_MIB * (1 << 20) + root.stat().st_size)
    mib = (1 << 20) // SECTOR
    table = (
        "label: dos\n"
        f"start={FAT_START_MIB * mib}, size={FAT_SIZE_MIB * mib}, type=c, bootable\n"
        f"start={ROOT_START_MIB * mib}, size={root_sectors}, type=83\n"
    )
    _run("sfdisk", "--no-reread", "--no-tell-kernel", "-q", disk, stdin=table)
    _run("dd", f"if={MBR_CODE}", f"of={disk}", "bs=440", "count=1", "conv=notrunc", "status=none")
    _run("dd", f"if={fat}", f"of={disk}", "bs=1M", f"seek={FAT_START_MIB}", "conv=notrunc,sparse", "status=none")
    _run("dd", f"if={root}", f"of={disk}", "bs=1M", f"seek={ROOT_START_MIB}", "conv=notrunc,sparse", "status=none")
    root.unlink()
    _run("qemu-img", "convert", "-O", "qcow2", disk, work / DISK)
    for leftover in (disk, fat, fstab, cfg):
        leftover.unlink()
    work.rename(target)
