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
from dataclasses import asdict, dataclass
from pathlib import Path

from numalab.files import file_lock
from numalab.lab.recipe import SUITE, Recipe
from numalab.progress import step

log = logging.getLogger(__name__)

BASE_DISK = "base.qcow2"
KERNEL = "vmlinuz"
INITRD = "initrd.img"
RECIPE_FILE = "recipe.json"


class ImageBuildError(RuntimeError):
    """The base image could not be built; the message points at the build log."""


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
    # systemd.getty_auto=0: the lab logs in over SSH. udev coldplug is masked, so ttyS0's device unit never
    # appears and a serial getty would hold multi-user.target (the boot's end) for its 90 s device timeout.
    # panic=5: reboot 5 s after a panic (the domain's on_reboot restarts it) instead of hanging until the SSH
    # wait gives up. Seen in CI under software emulation: an int3 Oops in sched_clock_cpu 7.7 s into boot,
    # while the kernel patched its own code (jump labels), then "Kernel panic - not syncing".
    # oops=panic: such an Oops panics (and so reboots) at once. Without it the kernel only kills the task: CI saw
    # three Oopses in a row on the server 43 s into boot before the panic came, and an Oops in scheduler code
    # can leave a lock held, the guest hung until the SSH wait gives up.
    cmdline: str = ("root=/dev/vda rw console=ttyS0 net.ifnames=0 nokaslr quiet loglevel=3 systemd.getty_auto=0 "
                    "panic=5 oops=panic")

    def kernel_cmdline(self, domain_type: str) -> str:
        """`cmdline` for a domain of `domain_type`. Under software emulation (qemu) with tsc=reliable: QEMU's
        TCG derives every vCPU's TSC from one host clock, monotonic across vCPUs, but the guest kernel sees a
        non-Intel CPU without constant_tsc in more than one socket (a lab guest's cells are its sockets), marks
        the TSC unstable ("TSCs unsynchronized") and falls back to the HPET, which QEMU emulates under its global
        lock: a clock read took 8.5 us on a 2-cell lab worker against 1.2 us on the 1-cell server, which kept
        the TSC (Python's time.monotonic), and every Go runtime reads the clock constantly."""
        return f"{self.cmdline} tsc=reliable" if domain_type == "qemu" else self.cmdline

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
        run("chroot", str(rootfs), "update-ca-certificates", "--fresh")  # the recipe's ca-certificates.conf
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
    calls = [[*root, "disable", *recipe.disabled_units]]
    if recipe.masked_units:
        calls.append([*root, "mask", *recipe.masked_units])
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
