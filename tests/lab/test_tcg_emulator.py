"""Single-threaded TCG for guests under software emulation: scripts/qemu-tcg-single rewrites libvirt's
`-accel tcg` and nothing else, and a domain names it only where the libvirt host has it.

No VM: the wrapper runs against a stand-in QEMU that prints its arguments; libvirt is a stand-in that
knows or does not know the wrapper.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import libvirt
import pytest

from numalab.lab.domains import TCG_SINGLE_EMULATOR, tcg_emulator

WRAPPER = Path(__file__).resolve().parents[2] / "scripts" / "qemu-tcg-single"


@pytest.fixture
def wrapper(tmp_path: Path) -> Path:
    """The wrapper with its QEMU replaced by a script printing one argument per line."""
    fake = tmp_path / "qemu"
    fake.write_text('#!/bin/sh\nfor a do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    text = WRAPPER.read_text()
    assert "QEMU=/usr/bin/qemu-system-x86_64\n" in text
    copy = tmp_path / "qemu-tcg-single"
    copy.write_text(text.replace("QEMU=/usr/bin/qemu-system-x86_64\n", f"QEMU={fake}\n"))
    copy.chmod(0o755)
    return copy


def args_through(wrapper: Path, *args: str) -> list[str]:
    done = subprocess.run([str(wrapper), *args], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


@pytest.mark.parametrize(("given", "passed"), [
    ("tcg", "tcg,thread=single"),
    ("tcg,tb-size=256", "tcg,tb-size=256,thread=single"),
    ("tcg,thread=multi", "tcg,thread=multi"),  # an explicit choice is kept
    ("kvm", "kvm"),
])
def test_the_wrapper_makes_tcg_single_threaded_and_passes_the_rest(wrapper: Path, given: str, passed: str) -> None:
    args = ["-name", "guest=tcg,debug-threads=on", "-accel", given, "-append", "console=ttyS0 quiet", "-S", ""]
    assert args_through(wrapper, *args) == [*args[:3], passed, *args[4:]]


def test_tcg_elsewhere_in_the_arguments_is_left_alone(wrapper: Path) -> None:
    args = ["-object", "tcg", "-device", "virtio-rng-pci"]
    assert args_through(wrapper, *args) == args


class FakeConn:
    """A libvirt connection that has probed (or failed to probe) emulators."""

    def __init__(self, present: bool) -> None:
        self.present = present
        self.asked: list[tuple] = []

    def getDomainCapabilities(self, *args: object) -> str:  # noqa: N802 - libvirt's name
        self.asked.append(args)
        if not self.present:
            raise libvirt.libvirtError(f"Cannot find 'QEMU' binary {args[0]}: No such file or directory")
        return "<domainCapabilities/>"


def test_software_emulation_uses_the_wrapper_where_the_libvirt_host_has_it() -> None:
    conn = FakeConn(present=True)
    assert tcg_emulator(conn, "qemu") == TCG_SINGLE_EMULATOR
    assert conn.asked[0][:4] == (TCG_SINGLE_EMULATOR, "x86_64", None, "qemu")


def test_no_wrapper_on_the_libvirt_host_means_libvirts_default_qemu() -> None:
    assert tcg_emulator(FakeConn(present=False), "qemu") is None


def test_hardware_virtualization_never_asks_for_the_wrapper() -> None:
    conn = FakeConn(present=True)
    assert tcg_emulator(conn, "kvm") is None and conn.asked == []
