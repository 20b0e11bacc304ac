"""The lab image's direct-boot initrd: busybox, the modules the root disk and the NIC need, and an /init that
mounts root and hands over (the recipe's initrd_init, templates/lab/initrd/init).

The Debian kernel builds virtio_blk, virtio_net and ext4 as modules, so a guest booted without its bootloader
needs an initrd. initramfs-tools' one (udev, hwdb, 12 MB) took 6-10 s of every boot under software emulation;
this one is an uncompressed cpio of ~5 MB whose /init loads ten modules. The module list and its order come from
the image's own `modprobe --show-depends`, the archive from its own `cpio`.
"""

from __future__ import annotations

import lzma
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

STAGING = "tmp/numalab-initrd"  # under the rootfs, removed once archived
BUSYBOX = "usr/bin/busybox"  # busybox-static: no libraries to copy


class InitrdError(RuntimeError):
    """The initrd could not be made; the message names what was missing."""


def module_files(show_depends: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The module files `modprobe -a --show-depends` output asks for, in load order, each once; builtins need
    none. A line it cannot read, or a `wanted` module it named neither as built in nor as a file, is refused: a
    guest that cannot mount its root is worse than a failed build."""
    files: list[str] = []
    builtin: set[str] = set()
    for line in show_depends:
        words = line.split()
        if not words:
            continue
        if words[0] == "builtin" and len(words) == 2:
            builtin.add(_module_name(words[1]))
            continue
        if words[0] != "insmod" or len(words) < 2:
            raise InitrdError(f"unexpected line from modprobe --show-depends: {line!r}")
        if words[1] not in files:
            files.append(words[1])
    named = builtin | {_module_name(unpacked_name(f).removesuffix(".ko")) for f in files}
    if missing := [m for m in wanted if _module_name(m) not in named]:
        raise InitrdError(f"modprobe --show-depends named no module file for {', '.join(missing)}")
    return files


def _module_name(name: str) -> str:
    """The kernel treats - and _ in module names alike (crc32c-intel is crc32c_intel)."""
    return name.replace("-", "_")


def unpacked_name(path: str) -> str:
    """A module's name in the initrd: busybox's insmod loads plain .ko files only."""
    name = Path(path).name
    if name.endswith(".ko.xz"):
        return name.removesuffix(".xz")
    if name.endswith(".ko"):
        return name
    raise InitrdError(f"{path}: neither .ko nor .ko.xz (the image's kernel compresses modules another way)")


def make_initrd(rootfs: Path, version: str, target: Path, modules: Iterable[str], init: str,
                run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> list[str]:
    """Write the initrd for kernel `version` of `rootfs` to `target`: `modules` with what they depend on, and
    `init` as its /init. The module files it loads, in order."""
    modules = list(modules)
    depends = run(["chroot", str(rootfs), "modprobe", "-a", "-S", version, "--show-depends", *modules],
                  capture_output=True, text=True)
    if depends.returncode != 0:
        raise InitrdError(f"modprobe -a --show-depends {' '.join(modules)} failed: {depends.stderr.strip()}")
    files = module_files(depends.stdout.splitlines(), modules)
    if not (rootfs / BUSYBOX).is_file():
        raise InitrdError(f"{rootfs / BUSYBOX} missing: the recipe needs busybox-static")
    staging = rootfs / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    for directory in ("bin", "modules", "proc", "sys", "dev", "root"):
        (staging / directory).mkdir(parents=True)
    shutil.copy2(rootfs / BUSYBOX, staging / "bin" / "busybox")
    (staging / "init").write_text(init)
    (staging / "init").chmod(0o755)
    order = []
    for file in files:
        name = unpacked_name(file)
        source = rootfs / file.lstrip("/")
        data = lzma.decompress(source.read_bytes()) if source.name.endswith(".xz") else source.read_bytes()
        (staging / "modules" / name).write_bytes(data)
        order.append(name)
    (staging / "modules.order").write_text("".join(f"{name}\n" for name in order))
    with target.open("wb") as out:
        archived = run(["chroot", str(rootfs), "sh", "-c", f"cd /{STAGING} && find . | cpio -o -H newc --quiet"],
                       stdout=out, stderr=subprocess.PIPE)
    shutil.rmtree(staging)
    if archived.returncode != 0:
        target.unlink(missing_ok=True)
        raise InitrdError(f"cpio of the initrd failed: {archived.stderr!r}")
    return order
