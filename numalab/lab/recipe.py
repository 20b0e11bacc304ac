"""What the lab's base image holds: Debian 13 packages, the units it enables, disables and masks, and the
files written into it. Its hash names the image, so any change here builds a new image (image.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

RECIPE_VERSION = 2
SUITE = "trixie"
ROOTFS_TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "lab" / "rootfs"

# What every guest needs: boot (kernel, systemd, udev, initramfs), ssh, the NUMA probes (numactl,
# iproute2, procps), python3 (pyinfra facts, numa-align's venv) and what the cluster stages run.
BASE_PACKAGES = (
    "linux-image-amd64",
    "systemd-sysv",
    "udev",
    "kmod",
    "initramfs-tools",
    "openssh-server",
    "numactl",
    "iproute2",
    "procps",
    "netbase",
    "curl",
    "ca-certificates",
    "python3",
    "python3-venv",
)
CLUSTER_PACKAGES = (
    "containerd",
    "runc",
    "containernetworking-plugins",
    "etcd-server",
    "docker-registry",
    "prometheus",
    "busybox-static",
    "conntrack",
    "iptables",
)
# Enabled at install by their packages; the stages enable each only where it runs.
DISABLED_UNITS = ("containerd.service", "docker-registry.service", "etcd.service", "prometheus.service")
# Boot work the lab does not need, measured under software emulation (see bench/lab_bench.py): timers,
# consoles on virtual terminals nobody sees, module loads and mounts for hardware and features the
# guests lack, the network daemons (the first-boot unit sets the fixed address with `ip`).
MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
    "getty@tty1.service",
    "getty-static.service",
    "systemd-timesyncd.service",
    "systemd-networkd.service",
    "systemd-networkd-wait-online.service",
    "systemd-network-generator.service",
    "modprobe@drm.service",
    "modprobe@efi_pstore.service",
    "modprobe@fuse.service",
    "systemd-pstore.service",
    "systemd-binfmt.service",
    "proc-sys-fs-binfmt_misc.automount",
    "sys-fs-fuse-connections.mount",
    "sys-kernel-config.mount",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "kmod-static-nodes.service",
    "systemd-journal-flush.service",
    # Coldplug: nothing the lab runs waits for udev's view of the boot-time devices (root is mounted by
    # the kernel, the address is set by MAC); udevd itself still runs for devices added later.
    "systemd-udev-trigger.service",
)
ENABLED_UNITS = ("numalab-firstboot.service", "ssh.service", "numalab-cfs-key.service")
# Cloud images built from this recipe (tests/lab/cloudimage.py) carry cloud-init instead of firstboot.
CLOUD_INIT_PACKAGES = ("cloud-init", "python3-cffi-backend")
CLOUD_INIT_FILES = {"etc/cloud/cloud.cfg.d/90-numalab.cfg": "datasource_list: [NoCloud, None]\n"}

# The Debian kernel builds these as modules; the root disk cannot be mounted without them.
INITRD_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "ext4")

# Files written into the rootfs after debootstrap (path relative to the rootfs -> content).
ROOTFS_FILES = {
    # No fsck pass: systemd would wait for udev to announce /dev/vda before booting on.
    "etc/fstab": "/dev/vda / ext4 rw,errors=remount-ro 0 0\n",
    "etc/systemd/journald.conf.d/numalab.conf": (ROOTFS_TEMPLATES / "journald-numalab.conf").read_text(),
    "etc/initramfs-tools/conf.d/numalab": "MODULES=list\nCOMPRESS=gzip\n",
    "etc/initramfs-tools/modules": "".join(f"{name}\n" for name in INITRD_MODULES),
    "etc/ssh/sshd_config.d/numalab.conf": (ROOTFS_TEMPLATES / "sshd-numalab.conf").read_text(),
    "etc/systemd/system/ssh.service.d/numalab.conf": (ROOTFS_TEMPLATES / "ssh-numalab.conf").read_text(),
    "etc/systemd/system/numalab-firstboot.service": (ROOTFS_TEMPLATES / "numalab-firstboot.service").read_text(),
    "usr/local/sbin/numalab-firstboot": (ROOTFS_TEMPLATES / "numalab-firstboot").read_text(),
    # The guests reach nothing outside the lab (an isolated network), so their trust store holds no public CA,
    # only what the pki stage adds (the cluster CA): update-ca-certificates then handles one certificate, not
    # Debian's 146, one sed and readlink each (109 s of a lab deploy under software emulation). A comment
    # line, not an empty file: an empty one makes every run a --fresh one. The build runs it --fresh once.
    "etc/ca-certificates.conf": "# numa-lab: no public CAs in the lab's isolated guests (numalab/lab/recipe.py)\n",
    # Software emulation oopsed a guest patching a static key: keep the CFS bandwidth key on (see the unit).
    "etc/systemd/system/numalab-cfs-key.service": (ROOTFS_TEMPLATES / "numalab-cfs-key.service").read_text(),
}
EXECUTABLES = ("usr/local/sbin/numalab-firstboot",)

DISK_SIZE = "4G"


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the image's content; its hash names the output directory."""

    suite: str = SUITE
    packages: tuple[str, ...] = BASE_PACKAGES + CLUSTER_PACKAGES
    extra_packages: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=lambda: dict(ROOTFS_FILES))
    executables: tuple[str, ...] = EXECUTABLES
    enabled_units: tuple[str, ...] = ENABLED_UNITS
    disabled_units: tuple[str, ...] = DISABLED_UNITS
    masked_units: tuple[str, ...] = MASKED_UNITS
    disk_size: str = DISK_SIZE
    version: int = RECIPE_VERSION

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
