"""Single-threaded TCG for guests under software emulation: scripts/qemu-tcg-single rewrites libvirt's
`-accel tcg` and nothing else; a domain names it only under software emulation, for a guest of more than one
vCPU in a lab whose vCPUs outnumber the host's CPUs, and only where the libvirt host has it.

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


@pytest.mark.parametrize(("kind", "vcpus", "lab_vcpus", "host_cpus", "single"), [
    ("qemu", 4, 15, 2, True),  # the cluster test's worker-1 on CI's 2 cores
    ("qemu", 8, 15, 2, True),  # its real-server worker
    ("qemu", 2, 15, 2, True),  # its server: one thread, one share of the host, like the others
    ("qemu", 1, 15, 2, False),  # the registry: one vCPU is one thread either way
    ("qemu", 2, 2, 2, False),  # a lab of one 2-vCPU guest has the host's cores to itself
    ("qemu", 4, 8, 2, True),  # the lab tests' two 4-vCPU guests
    ("qemu", 4, 15, 16, False),  # a host with a core for every vCPU
    ("kvm", 8, 15, 2, False),  # hardware virtualization has no TCG
])
def test_single_threaded_tcg_where_the_labs_vcpus_outnumber_the_hosts_cpus(
        kind: str, vcpus: int, lab_vcpus: int, host_cpus: int, single: bool) -> None:
    assert single_threaded_tcg(kind, vcpus, lab_vcpus, host_cpus) is single
