"""The lab's libvirt network, and the host's address space it must not overlap.

A new lab network is checked against the host's routes and its other libvirt networks before it is
defined; an existing one is changed only when it carries the lab's metadata.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import subprocess
import xml.etree.ElementTree as ET

import libvirt

from numalab.lab.errors import LabError
from numalab.lab.libvirt_objects import NAMESPACE, lab_of_xml, lookup_or_none
from numalab.lab.remote import is_local_uri
from numalab.lab.settings import DEFAULT_SUBNET, Settings, check_subnet_free
from numalab.lab.spec import Guest, Lab
from numalab.model.errors import ValidationError
from numalab.render import render

log = logging.getLogger(__name__)


def network_routes(conn: libvirt.virConnect, uri: str, exclude_network: str = "") -> list[tuple[str, str]]:
    """(destination, device) of the host's routes (local URIs only) and of its libvirt networks."""
    routes: list[tuple[str, str]] = []
    if is_local_uri(uri):
        out = subprocess.run(["ip", "-j", "-4", "route", "show"], capture_output=True, text=True, check=True)
        routes += [(r.get("dst", ""), r.get("dev", "")) for r in json.loads(out.stdout or "[]")]
    for net in conn.listAllNetworks():
        if net.name() == exclude_network:
            continue
        root = ET.fromstring(net.XMLDesc())
        bridge = root.find("bridge")
        device = bridge.get("name", net.name()) if bridge is not None else net.name()
        for ip in root.iterfind("ip"):
            if ip.get("family", "ipv4") != "ipv4" or not ip.get("address"):
                continue
            mask = ip.get("prefix") or ip.get("netmask") or "24"
            routes.append((f"{ip.get('address')}/{mask}", f"{device} (libvirt network {net.name()})"))
    return routes


def free_subnet(uri: str, first: int, last: int) -> str:
    """The first /24 at offsets first..last after the default lab subnet that overlaps nothing (test labs)."""
    conn = libvirt.open(uri)
    try:
        routes = network_routes(conn, uri)
    finally:
        conn.close()
    base = ipaddress.IPv4Network(DEFAULT_SUBNET)
    for offset in range(first, last + 1):
        candidate = ipaddress.IPv4Network((int(base.network_address) + offset * 256, 24))
        try:
            check_subnet_free(candidate, routes, own_bridge="")
        except ValidationError:
            continue
        return str(candidate)
    raise LabError(f"no free /24 subnet at offsets {first}-{last} from {base}")


def check_subnet(conn: libvirt.virConnect, name: str, settings: Settings) -> None:
    """Before anything is created: a new lab network must not overlap any route or network."""
    if lookup_or_none(conn.networkLookupByName, name) is None:
        routes = network_routes(conn, settings.uri, exclude_network=name)
        check_subnet_free(settings.subnet, routes, settings.bridge, where="NUMALAB_SUBNET")


def ensure_network(conn: libvirt.virConnect, name: str, lab: Lab) -> None:
    """The lab's network `name` is defined with a DHCP host entry per guest, and active."""
    net = lookup_or_none(conn.networkLookupByName, name)
    if net is None:
        xml = render("lab/network.xml.j2", name=name, namespace=NAMESPACE, settings=lab.settings, guests=lab.guests)
        net = conn.networkDefineXML(xml)
        log.info("defined network %s", name)
    else:
        _require_owned_network(net, lab.settings.name)
        _add_missing_dhcp_hosts(net, lab.guests)
    if not net.isActive():
        net.create()


def remove_network(conn: libvirt.virConnect, name: str, lab_name: str) -> list[str]:
    """Stop and undefine network `name` if it carries lab `lab_name`'s metadata; what was removed."""
    net = lookup_or_none(conn.networkLookupByName, name)
    if net is None or lab_of_xml(net.XMLDesc()) != lab_name:
        return []
    if net.isActive():
        net.destroy()
    net.undefine()
    return [f"network {name}"]


def _require_owned_network(net: libvirt.virNetwork, lab_name: str) -> None:
    if lab_of_xml(net.XMLDesc()) != lab_name:
        raise LabError(
            f"libvirt network {net.name()} exists but does not carry lab {lab_name}'s "
            "metadata; refusing to touch it (rename the lab with NUMALAB_NAME)"
        )


def _add_missing_dhcp_hosts(net: libvirt.virNetwork, guests: tuple[Guest, ...]) -> None:
    """Guests added to the inventory after the network was defined get their DHCP host entry."""
    root = ET.fromstring(net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE))
    present = {h.get("mac") for h in root.iterfind("./ip/dhcp/host")}
    for guest in guests:
        if guest.mac in present:
            continue
        flags = libvirt.VIR_NETWORK_UPDATE_AFFECT_CONFIG
        if net.isActive():
            flags |= libvirt.VIR_NETWORK_UPDATE_AFFECT_LIVE
        entry = f"<host mac='{guest.mac}' name='{guest.name}' ip='{guest.address}'/>"
        net.update(
            libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST, -1, entry, flags
        )
