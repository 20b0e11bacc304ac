"""Power faults on a lab guest, through libvirt: the reset button, and a power cycle on changed hardware."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import libvirt

from numalab.lab.spec import Lab


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
    conn = libvirt.open(lab.settings.uri)
    try:
        domain = conn.lookupByName(lab.domain_name(lab.guest(name)))
        root = ET.fromstring(domain.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        cells = root.findall("./cpu/numa/cell")
        changed = next(element for element in cells if element.get("id") == str(cell))
        old = int(changed.get("memory"))
        changed.set("memory", str(mib * 1024))
        changed.set("unit", "KiB")
        total = str(sum(int(element.get("memory")) for element in cells))
        for tag in ("memory", "currentMemory"):
            element = root.find(tag)
            if element is not None:
                element.text, element.attrib["unit"] = total, "KiB"
        domain.destroy()
        conn.defineXML(ET.tostring(root, encoding="unicode")).create()
    finally:
        conn.close()
    return f"cell {cell} of {name} {old // 1024} -> {mib} MiB in its domain, powered off and on"
