"""numa-lab's direct-boot initrd, built from a fake rootfs: the modules modprobe names, in its order, unpacked
for busybox's insmod, with the recipe's /init; what it cannot build it refuses by name."""

from __future__ import annotations

import lzma
from pathlib import Path
from types import SimpleNamespace

import pytest

from numalab.lab.initrd import STAGING, InitrdError, make_initrd, module_files, unpacked_name
from numalab.lab.recipe import INITRD_INIT, INITRD_MODULES, Recipe

VERSION = "6.12.117+deb13-amd64"
KERNEL = f"/lib/modules/{VERSION}/kernel"
# What the trixie guest's modprobe printed for virtio_pci virtio_blk virtio_net ext4 (measured in the lab)
SHOW_DEPENDS = f"""builtin virtio_pci
insmod {KERNEL}/drivers/block/virtio_blk.ko.xz
insmod {KERNEL}/net/core/failover.ko.xz
insmod {KERNEL}/drivers/net/net_failover.ko.xz
insmod {KERNEL}/drivers/net/virtio_net.ko.xz
insmod {KERNEL}/arch/x86/crypto/crc32c-intel.ko.xz
insmod {KERNEL}/crypto/crc32c_generic.ko.xz
insmod {KERNEL}/fs/jbd2/jbd2.ko.xz
insmod {KERNEL}/fs/mbcache.ko.xz
insmod {KERNEL}/lib/crc16.ko.xz
insmod {KERNEL}/crypto/crc32c_generic.ko.xz
insmod {KERNEL}/fs/ext4/ext4.ko.xz
"""


def test_modules_come_in_modprobes_order_once_each_and_builtins_need_no_file() -> None:
    files = module_files(SHOW_DEPENDS.splitlines(), INITRD_MODULES)
    assert [Path(f).name for f in files] == [
        "virtio_blk.ko.xz", "failover.ko.xz", "net_failover.ko.xz", "virtio_net.ko.xz", "crc32c-intel.ko.xz",
        "crc32c_generic.ko.xz", "jbd2.ko.xz", "mbcache.ko.xz", "crc16.ko.xz", "ext4.ko.xz"]


def test_a_line_modprobe_should_not_print_is_refused() -> None:
    with pytest.raises(InitrdError, match="unexpected line"):
        module_files(["install /bin/true"], INITRD_MODULES)


def test_a_wanted_module_modprobe_did_not_name_is_refused() -> None:
    """Without -a, modprobe reads every name after the first as a parameter of the first: for virtio_pci (built
    in) it printed one builtin line and nothing else, and the build went on to an initrd without modules."""
    with pytest.raises(InitrdError, match="virtio_blk, virtio_net, ext4"):
        module_files(["builtin virtio_pci"], INITRD_MODULES)
    assert module_files(["builtin virtio_pci", f"insmod {KERNEL}/arch/x86/crypto/crc32c-intel.ko.xz"],
                        ["virtio_pci", "crc32c_intel"]) == [f"{KERNEL}/arch/x86/crypto/crc32c-intel.ko.xz"]


def test_only_plain_or_xz_modules_are_taken() -> None:
    assert unpacked_name(f"{KERNEL}/fs/ext4/ext4.ko.xz") == "ext4.ko"
    assert unpacked_name(f"{KERNEL}/fs/ext4/ext4.ko") == "ext4.ko"
    with pytest.raises(InitrdError, match="ext4.ko.zst"):
        unpacked_name(f"{KERNEL}/fs/ext4/ext4.ko.zst")


def fake_rootfs(root: Path) -> Path:
    for line in SHOW_DEPENDS.splitlines()[1:]:
        module = root / line.split()[1].lstrip("/")
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_bytes(lzma.compress(f"module {module.name}".encode()))
    busybox = root / "usr/bin/busybox"
    busybox.parent.mkdir(parents=True)
    busybox.write_bytes(b"busybox")
    return root


def test_the_initrd_holds_busybox_the_unpacked_modules_their_order_and_the_init(tmp_path: Path) -> None:
    rootfs = fake_rootfs(tmp_path / "rootfs")
    seen: dict[str, object] = {}

    def run(argv: list[str], **kwargs: object) -> SimpleNamespace:
        assert argv[:2] == ["chroot", str(rootfs)]
        if "modprobe" in argv:
            assert argv[2:] == ["modprobe", "-a", "-S", VERSION, "--show-depends", *INITRD_MODULES]
            return SimpleNamespace(returncode=0, stdout=SHOW_DEPENDS, stderr="")
        staging = rootfs / STAGING  # archived as it is when cpio runs
        seen["files"] = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        seen["order"] = (staging / "modules.order").read_text().split()
        seen["ext4"] = (staging / "modules" / "ext4.ko").read_bytes()
        seen["init"] = (staging / "init").read_text()
        seen["mode"] = (staging / "init").stat().st_mode & 0o777
        kwargs["stdout"].write(b"070701...")  # type: ignore[attr-defined]
        return SimpleNamespace(returncode=0, stderr=b"")

    target = tmp_path / "initrd.img"
    order = make_initrd(rootfs, VERSION, target, INITRD_MODULES, INITRD_INIT, run=run)
    assert order == seen["order"] and order[0] == "virtio_blk.ko" and order[-1] == "ext4.ko" and len(order) == 10
    assert "bin/busybox" in seen["files"] and "init" in seen["files"] and "modules/virtio_net.ko" in seen["files"]
    assert seen["ext4"] == b"module ext4.ko.xz" and seen["mode"] == 0o755
    assert seen["init"] == INITRD_INIT and "switch_root /root /sbin/init" in INITRD_INIT
    assert target.read_bytes() == b"070701..."
    assert not (rootfs / STAGING).exists()  # nothing of it left in the image


def test_without_busybox_or_a_working_modprobe_nothing_is_written(tmp_path: Path) -> None:
    rootfs = fake_rootfs(tmp_path / "rootfs")
    target = tmp_path / "initrd.img"
    failing = lambda argv, **kw: SimpleNamespace(returncode=1, stdout="", stderr="modprobe: FATAL: no ext4")  # noqa: E731
    with pytest.raises(InitrdError, match="no ext4"):
        make_initrd(rootfs, VERSION, target, INITRD_MODULES, INITRD_INIT, run=failing)
    (rootfs / "usr/bin/busybox").unlink()
    answering = lambda argv, **kw: SimpleNamespace(returncode=0, stdout=SHOW_DEPENDS, stderr="")  # noqa: E731
    with pytest.raises(InitrdError, match="busybox-static"):
        make_initrd(rootfs, VERSION, target, INITRD_MODULES, INITRD_INIT, run=answering)
    assert not target.exists()


def test_a_changed_init_builds_a_new_image() -> None:
    assert Recipe(initrd_init=INITRD_INIT + "# changed\n").digest() != Recipe().digest()

