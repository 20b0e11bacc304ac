"""Power faults on a lab guest, through libvirt: the reset button, a power cycle on changed hardware, and a
guest re-cut into another NUMA shape (what `ensure_guest` never does to a running lab)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import libvirt

from numalab.lab.spec import Guest, Lab


def reset_guest(lab: Lab, name: str) -> None:
    """Hard-reset a guest: the reset button, no clean shutdown (what it had not written to disk is lost)."""
    conn = libvirt.open(lab.settings.uri)
    try:
        conn.lookupByName(lab.domain_name(lab.guest(name))).reset(0)
    finally:
        conn.close()


def shrink_cell(lab: Lab, name: str, cell: int, mib: int) -> str:
    """Pull the plug on a guest, give one of its cells `mib` MiB, and power it on: hardware changed under a
    kubelet whose Memory Manager checkpoint describes the old cell."""
    old: list[int] = []

    def shrunk(xml: str) -> str:
        root = ET.fromstring(xml)
        cells = root.findall("./cpu/numa/cell")
        changed = next(element for element in cells if element.get("id") == str(cell))
        old.append(int(changed.get("memory")))
        changed.set("memory", str(mib * 1024))
        changed.set("unit", "KiB")
        total = str(sum(int(element.get("memory")) for element in cells))
        for tag in ("memory", "currentMemory"):
            element = root.find(tag)
            if element is not None:
                element.text, element.attrib["unit"] = total, "KiB"
        return ET.tostring(root, encoding="unicode")

    _power_cycled(lab, lab.domain_name(lab.guest(name)), shrunk)
    return f"cell {cell} of {name} {old[0] // 1024} -> {mib} MiB in its domain, powered off and on"


def _power_cycled(lab: Lab, domain_name: str, change: Callable[[str], str]) -> tuple[str, str]:
    """Power the domain off (no shutdown), define it again as `change` makes its inactive XML, power it on;
    (XML before, XML after)."""
    conn = libvirt.open(lab.settings.uri)
    try:
        domain = conn.lookupByName(domain_name)
        before = domain.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        after = change(before)
        domain.destroy()
        conn.defineXML(after).create()
    finally:
        conn.close()
    return before, after


def reshape(lab: Lab, guest: Guest) -> str:
    """Pull the plug on `guest`'s domain, give it `guest`'s NUMA shape and power it on: a machine whose NUMA
    layout changed, as after a BIOS setting (sub-NUMA clustering) or a board swap."""
    before, after = _power_cycled(lab, lab.domain_name(guest), lambda xml: reshaped_xml(xml, guest))
    return f"{guest.name} re-cut from {describe_cells(before)} to {describe_cells(after)}, powered off and on"


def reshaped_xml(xml: str, guest: Guest) -> str:
    """The domain with `guest`'s vCPUs, socket layout, memory and cells (their memory and distances); the rest
    (disks, network, emulator) kept."""
    root = ET.fromstring(xml)
    root.find("vcpu").text = str(guest.vcpus)
    for tag in ("memory", "currentMemory"):
        element = root.find(tag)
        if element is not None:
            element.text, element.attrib["unit"] = str(guest.memory // 1024), "KiB"
    cpu = root.find("cpu")
    sockets, cores, threads = guest.cpu_topology
    cpu.find("topology").attrib.update(sockets=str(sockets), dies="1", cores=str(cores), threads=str(threads))
    cpu.remove(cpu.find("numa"))
    numa = ET.SubElement(cpu, "numa")
    topology = guest.topology
    for cell in guest.domain_cells:
        element = ET.SubElement(numa, "cell", id=str(cell["id"]), memory=str(cell["memory_kib"]), unit="KiB")
        if cell["vcpus"]:
            element.set("cpus", cell["vcpus"])
        if topology.distances is not None:
            distances = ET.SubElement(element, "distances")
            for other in topology.cells:
                value = str(topology.distance(cell["id"], other.id))
                ET.SubElement(distances, "sibling", id=str(other.id), value=value)
    return ET.tostring(root, encoding="unicode")


def describe_cells(xml: str) -> str:
    """A domain's cells as `0:0-1/2048M 1:2-3/2048M` (memory in KiB in the domain), `with distances` if set."""
    root = ET.fromstring(xml)
    cells = root.findall("./cpu/numa/cell")
    text = " ".join(f"{c.get('id')}:{c.get('cpus') or '-'}/{int(c.get('memory')) // 1024}M" for c in cells)
    return text + (" with distances" if root.find("./cpu/numa/cell/distances") is not None else "")
