"""The lab's guest domains: which virtualization they get, their state, their removal, their shape in messages.

Only domains carrying the lab's metadata count as the lab's: another domain of the same name is "absent"
to the lab and is never removed.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from numalab.lab.libvirt_objects import lab_of_xml, lookup_or_none
from numalab.lab.remote import is_local_uri
from numalab.lab.settings import Settings
from numalab.lab.spec import Guest

_STATES = {
    libvirt.VIR_DOMAIN_RUNNING: "running",
    libvirt.VIR_DOMAIN_PAUSED: "paused",
    libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down",
    libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
    libvirt.VIR_DOMAIN_CRASHED: "crashed",
}


def describe_shape(guest: Guest) -> str:
    """One line like `2 cells: 0-1/2Gi 2-3/2Gi` plus non-default distances."""
    topo = guest.topology
    cells = " ".join(f"{cell.cpulist}/{cell.memory // (1 << 20)}Mi" for cell in topo.cells)
    text = f"{len(topo.cells)} cell{'s' if len(topo.cells) > 1 else ''}: {cells}"
    if topo.distances is not None and not topo.has_default_distances:
        rows = ";".join(",".join(str(topo.distance(a, b)) for b in topo.ids) for a in topo.ids)
        text += f" distances {rows}"
    return text


def domain_type(conn: libvirt.virConnect, settings: Settings) -> str:
    """auto: kvm only with hardware virtualization (vmx/svm) and a usable /dev/kvm, else qemu."""
    wanted = settings.domain_type
    if wanted != "auto":
        return wanted
    if is_local_uri(settings.uri):
        flags = Path("/proc/cpuinfo").read_text()
        hardware = re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, flags=re.M) is not None
        return "kvm" if hardware and _kvm_usable() else "qemu"
    caps = ET.fromstring(conn.getCapabilities())
    features = {f.get("name") for f in caps.iterfind("./host/cpu/feature")}
    has_kvm = caps.find("./guest/arch/domain[@type='kvm']") is not None
    return "kvm" if has_kvm and features & {"vmx", "svm"} else "qemu"


# scripts/qemu-tcg-single, where scripts/host-prep.sh installs it: QEMU with single-threaded TCG.
TCG_SINGLE_EMULATOR = "/usr/local/libexec/numa-lab/qemu-tcg-single"


def single_threaded_tcg(kind: str, vcpus: int, lab_vcpus: int, host_cpus: int) -> bool:
    """Whether a guest of `vcpus` vCPUs, in a lab of `lab_vcpus` in all, runs single-threaded TCG: under software
    emulation, a guest with more than one vCPU when the lab's vCPUs outnumber the libvirt host's CPUs. Then
    vCPU threads share the host's cores anyway; multi-threaded TCG makes every cross-vCPU step (TLB-flush
    rendezvous, exclusive sections, IPIs) wait for a vCPU thread that is not running, and gives a guest one
    share of the host per vCPU thread. Measured on 2 cores:
    - four lab guests up: a Go binary's start (`kubelet --version`) took 2.6-3.0 s on a single-threaded 4-vCPU
      worker against 5.0-5.4 s on its multi-threaded twin; idle, the guest took 20 % of a host core, not 27 %;
    - CI's cluster test (15 vCPUs in four guests): with the 2-vCPU server alone multi-threaded (run M) it took
      56-72 % of a host core through the e2e suite against 47-49 % single-threaded (run L), and the workers
      got less. The test's totals (1461 and 1631 s single-threaded, runs L and N; 1567 s in run M; 1637 s
      before, run K) vary between runs as much as that, so they show no gain of their own;
    - a lab of one 2-vCPU guest (the cloud-image test) booted and checked in 57 s multi-threaded, 84 s
      single-threaded: with the host's cores to itself, a guest uses both."""
    return kind == "qemu" and vcpus > 1 and lab_vcpus > host_cpus


def tcg_emulator(conn: libvirt.virConnect) -> str | None:
    """TCG_SINGLE_EMULATOR when the libvirt host has it (libvirt probes it, so a remote host is asked too)."""
    try:
        conn.getDomainCapabilities(TCG_SINGLE_EMULATOR, "x86_64", None, "qemu", 0)
    except libvirt.libvirtError:
        return None
    return TCG_SINGLE_EMULATOR


def domain_state(conn: libvirt.virConnect, name: str, lab_name: str) -> str:
    """running, shut off, ... of domain `name`; "absent" when there is none carrying lab `lab_name`."""
    domain = lookup_or_none(conn.lookupByName, name)
    if domain is None or lab_of_xml(domain.XMLDesc(0)) != lab_name:
        return "absent"
    return _STATES.get(domain.state()[0], "unknown")


def remove_domains(conn: libvirt.virConnect, lab_name: str) -> list[str]:
    """Stop and undefine every domain carrying lab `lab_name`'s metadata; what was removed."""
    removed = []
    for domain in conn.listAllDomains(0):
        if lab_of_xml(domain.XMLDesc(0)) != lab_name:
            continue
        if domain.isActive():
            domain.destroy()
        domain.undefine()
        removed.append(f"domain {domain.name()}")
    return removed


def _kvm_usable() -> bool:
    """libvirt's qemu (user libvirt-qemu, group kvm) can open /dev/kvm."""
    try:
        st = os.stat("/dev/kvm")
    except FileNotFoundError:
        return False
    try:
        import grp

        kvm_gid = grp.getgrnam("kvm").gr_gid
    except KeyError:
        kvm_gid = None
    return bool(st.st_mode & 0o006) or (st.st_gid == kvm_gid and st.st_mode & 0o060 == 0o060)
