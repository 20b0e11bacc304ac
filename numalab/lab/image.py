"""The lab's base image: a Debian 13 rootfs from debootstrap, made into a qcow2 without loop mounts.

Built on the controller, once per recipe: the output directory is named by a hash of the recipe, so a
changed package list or config file builds a new image and an unchanged one is reused across runs.
Guests boot it by direct kernel boot with the image's own vmlinuz and a small initrd holding the virtio
modules. It carries everything the cluster stages install (isolated guests reach no mirror), with their
services disabled: each stage enables only what its hosts run. It has no cloud-init: a small first-boot
unit applies the seed. A standard cloud image (qcow2 with cloud-init, own bootloader) can be used instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from numalab.lab.locking import file_lock
from numalab.progress import step

log = logging.getLogger(__name__)

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
    "busybox-static",
    "conntrack",
    "iptables",
)
# Enabled at install by their packages; the stages enable each only where it runs.
DISABLED_UNITS = ("containerd.service", "docker-registry.service", "etcd.service")
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
ENABLED_UNITS = ("numalab-firstboot.service", "ssh.service")
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
}
EXECUTABLES = ("usr/local/sbin/numalab-firstboot",)

DISK_SIZE = "4G"
BASE_DISK = "base.qcow2"
KERNEL = "vmlinuz"
INITRD = "initrd.img"
RECIPE_FILE = "recipe.json"


class ImageBuildError(RuntimeError):
    """The base image could not be built; the message points at the build log."""


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


@dataclass(frozen=True)
class Image:
    """A bootable base disk; kernel/initrd are None for images that boot from their own bootloader."""

    disk: Path
    kernel: Path | None = None
    initrd: Path | None = None
    # Names the image's volumes in a lab's pool; default: the directory holding the disk (a recipe digest).
    name: str | None = None
    # nokaslr: the kernel image (~40 MiB) always sits in node 0 instead of a random node, so every
    # other node's MemTotal matches its declared cell memory.
    # quiet: every line through the emulated UART costs boot time; errors still reach the console log.
    cmdline: str = "root=/dev/vda rw console=ttyS0 net.ifnames=0 nokaslr quiet loglevel=3"

    @property
    def direct_boot(self) -> bool:
        return self.kernel is not None

    @property
    def tag(self) -> str:
        return self.name or self.disk.parent.name


# A mirror serving any of these serves the image's suite too (the host may run an older release).
DEBIAN_SUITES = ("bullseye", "bookworm", "trixie", "forky", "sid", "oldstable", "stable", "testing", "unstable")


def host_debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this host's apt already uses (deb822 .sources or a one-line sources.list)."""
    candidates: list[str] = []
    for path in sorted((sources_dir / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, flags=re.M))
            if fields.get("Enabled", "yes") == "no" or "URIs" not in fields:
                continue
            if set(fields.get("Suites", "").split()) & set(DEBIAN_SUITES):
                candidates.append(fields["URIs"].split()[0])
    sources_list = sources_dir / "sources.list"
    if sources_list.exists():
        for line in sources_list.read_text().splitlines():
            words = line.split("#", 1)[0].split()
            words = [w for w in words if not w.startswith("[")]
            if len(words) >= 3 and words[0] == "deb" and words[2] in DEBIAN_SUITES:
                candidates.append(words[1])
    if not candidates:
        raise ImageBuildError(
            f"no Debian apt source on this host to build Debian {SUITE} from; "
            "set NUMALAB_DEBIAN_MIRROR to a Debian mirror URL"
        )
    return candidates[0]


def built_image(recipe: Recipe, image_root: Path, mirror: str | None = None) -> Image:
    """The image for `recipe` under image_root/<digest>, building it first if it is not there yet.

    A file lock makes concurrent callers (parallel guests, parallel processes) build it only once.
    """
    target = image_root / recipe.digest()
    with file_lock(image_root / f"{recipe.digest()}.lock"):
        if not (target / RECIPE_FILE).exists():
            source = mirror or os.environ.get("NUMALAB_DEBIAN_MIRROR") or host_debian_mirror()
            with step(f"building the Debian {recipe.suite} guest image {target.name} (a few minutes, once per recipe)"):
                _build(recipe, target, source)
    return Image(disk=target / BASE_DISK, kernel=target / KERNEL, initrd=target / INITRD)


def cloud_image(location: str, image_root: Path) -> Image:
    """A standard cloud image (qcow2 with cloud-init, own bootloader) from a local path or a URL."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme in ("http", "https"):
        target = image_root / ("cloud-" + hashlib.sha256(location.encode()).hexdigest()[:16]) / BASE_DISK
        with file_lock(target.parent.with_suffix(".lock")):
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(".part")
                urllib.request.urlretrieve(location, partial)
                partial.rename(target)
        return Image(disk=target)
    path = Path(location).expanduser()
    if not path.is_file():
        raise ImageBuildError(f"NUMALAB_IMAGE: {location} is neither an http(s) URL nor an existing file")
    # Not the directory's name: two images side by side (or one replaced in place) must not share volumes.
    path = path.resolve()
    stat = path.stat()
    identity = f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return Image(disk=path, name="cloud-" + hashlib.sha256(identity.encode()).hexdigest()[:16])


def _build(recipe: Recipe, target: Path, mirror: str) -> None:
    work = target.with_name(target.name + ".build")
    _refuse_mounts_under(work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    build_log = work.with_name(target.name + ".build.log")
    rootfs = work / "rootfs"
    packages = ",".join(recipe.packages + recipe.extra_packages)
    log.info("building base image %s from %s (log: %s)", target.name, mirror, build_log)
    with build_log.open("w") as out:

        def run(*argv: str) -> None:
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise ImageBuildError(
                    f"image build step failed ({argv[0]}, exit {done.returncode}); see {build_log}"
                )

        run("debootstrap", "--variant=minbase", f"--include={packages}", recipe.suite, str(rootfs), mirror)
        _configure_rootfs(rootfs, recipe)
        for argv in _systemctl_offline(rootfs, recipe):
            run(*argv)
        run("chroot", str(rootfs), "update-initramfs", "-u", "-k", "all")
        _mark_updated(rootfs)
        _copy_boot_files(rootfs, work)
        raw = work / "disk.raw"
        run("truncate", "-s", recipe.disk_size, str(raw))
        run("mkfs.ext4", "-q", "-F", "-L", "numalab-root", "-d", str(rootfs), str(raw))
        run("qemu-img", "convert", "-O", "qcow2", str(raw), str(work / BASE_DISK))
        raw.unlink()
    shutil.rmtree(rootfs)
    (work / RECIPE_FILE).write_text(json.dumps(asdict(recipe), indent=2, sort_keys=True) + "\n")
    work.rename(target)
    build_log.rename(target / "build.log")


def _refuse_mounts_under(path: Path) -> None:
    """An interrupted debootstrap can leave proc/sys mounted in its rootfs: never rmtree through them."""
    prefix = str(path.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    stale = [m for m in mounts if m.startswith(prefix)]
    if stale:
        raise ImageBuildError(f"an earlier build left mounts under {path}: umount {' '.join(stale)} first")


def _configure_rootfs(rootfs: Path, recipe: Recipe) -> None:
    for relative, content in recipe.files.items():
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    for relative in recipe.executables:
        (rootfs / relative).chmod(0o755)
    # Per-guest identity comes from the seed: no baked-in host keys, machine id or hostname.
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (rootfs / "etc/machine-id").write_text("")
    (rootfs / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (rootfs / "etc/hostname").unlink(missing_ok=True)
    # Guests reach no mirror: the package cache and lists are dead weight.
    for cached in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        cached.unlink()
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True)


def _mark_updated(rootfs: Path) -> None:
    """Tell systemd /etc and /var are up to date with /usr, so no ConditionNeedsUpdate unit (ldconfig,
    sysusers, hwdb, journal catalog) runs at first boot: it did, for half a minute under emulation."""
    stamp = f"TIMESTAMP_NSEC={(rootfs / 'usr').stat().st_mtime_ns}\n"
    for directory in ("etc", "var"):
        (rootfs / directory / ".updated").write_text(stamp)


def _systemctl_offline(rootfs: Path, recipe: Recipe) -> list[list[str]]:
    """systemctl calls that set the image's units up without a running systemd (chroot is offline)."""
    root = ["chroot", str(rootfs), "systemctl"]
    calls = [[*root, "disable", *recipe.disabled_units], [*root, "mask", *recipe.masked_units]]
    if recipe.enabled_units:
        calls.append([*root, "enable", *recipe.enabled_units])
    return calls


def _copy_boot_files(rootfs: Path, work: Path) -> None:
    kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise ImageBuildError(f"expected one kernel in {rootfs}/boot, found {[k.name for k in kernels]}")
    version = kernels[0].name.removeprefix("vmlinuz-")
    shutil.copyfile(kernels[0], work / KERNEL)
    shutil.copyfile(rootfs / "boot" / f"initrd.img-{version}", work / INITRD)
