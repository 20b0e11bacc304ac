"""Single-threaded TCG for guests under software emulation: scripts/qemu-tcg-single rewrites libvirt's
`-accel tcg` and nothing else; a domain names it only for a guest with more vCPUs than the host's CPUs, under
software emulation, and only where the libvirt host has it.

No VM: the wrapper runs against a stand-in QEMU that prints its arguments; libvirt is a stand-in that
knows or does not know the wrapper.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import libvirt
import pytest

from numalab.lab.domains import TCG_SINGLE_EMULATOR, single_threaded_tcg, tcg_emulator

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


def test_the_wrapper_is_used_where_the_libvirt_host_has_it() -> None:
    conn = FakeConn(present=True)
    assert tcg_emulator(conn) == TCG_SINGLE_EMULATOR
    assert conn.asked[0][:4] == (TCG_SINGLE_EMULATOR, "x86_64", None, "qemu")
    assert tcg_emulator(FakeConn(present=False)) is None


@pytest.mark.parametrize(("kind", "vcpus", "host_cpus", "single"), [
    ("qemu", 4, 2, True),  # a lab worker on CI's 2 cores
    ("qemu", 8, 2, True),  # the real-server worker
    ("qemu", 2, 2, False),  # the server: one thread per vCPU, both host cores during the control plane's start
    ("qemu", 1, 2, False),
    ("qemu", 4, 16, False),
    ("kvm", 8, 2, False),  # hardware virtualization has no TCG
])
def test_single_threaded_tcg_only_for_emulated_guests_with_more_vcpus_than_host_cpus(
        kind: str, vcpus: int, host_cpus: int, single: bool) -> None:
    assert single_threaded_tcg(kind, vcpus, host_cpus) is single
