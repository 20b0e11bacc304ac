"""The cluster test's re-cut of a lab guest into another NUMA shape: the domain XML libvirt is given."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import libvirt

from numalab.lab.spec import lab_from_dict
from tests.cluster.power import describe_cells, reshaped_xml
from tests.lab.shapes import FOUR_CELL_NUMA
from tests.lab.test_templates import domain_xml

TWO_CELLS = {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}


def guest(numa: dict):  # noqa: ANN201 - a Guest
    return lab_from_dict({"settings": {"name": "t"}, "guests": [{"name": "worker-1", "numa": numa}]})


def test_a_two_cell_domain_re_cut_into_four_cells_with_distances_keeps_the_rest() -> None:
    before = domain_xml(guest(TWO_CELLS), "worker-1")
    after = reshaped_xml(before, guest(FOUR_CELL_NUMA).guests[0])
    conn = libvirt.open("test:///default")
    try:  # libvirt's own parser keeps it
        root = ET.fromstring(conn.defineXML(after).XMLDesc(0))
    finally:
        conn.close()
    cells = root.findall("cpu/numa/cell")
    assert [(c.get("id"), c.get("cpus"), c.get("memory")) for c in cells] == [
        (str(n), str(n), str(1 << 20)) for n in range(4)]
    siblings = {(c.get("id"), s.get("id")): s.get("value") for c in cells for s in c.findall("distances/sibling")}
    assert siblings[("2", "3")] == "12" and siblings[("1", "2")] == "30" and siblings[("0", "0")] == "10"
    assert root.find("vcpu").text == "4" and root.find("memory").text == str(4 << 20)
    assert root.find("cpu/topology").get("sockets") == "4"
    kept = ET.fromstring(before)
    assert ET.tostring(root.find("devices/disk/source")) == ET.tostring(kept.find("devices/disk/source"))
    assert describe_cells(before) == "0:0-1/2048M 1:2-3/2048M"
    assert describe_cells(after) == "0:0/1024M 1:1/1024M 2:2/1024M 3:3/1024M with distances"
