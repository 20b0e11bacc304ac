"""Real servers' shapes as lab guests: SMT threads, offline vCPUs, a memory-only cell and hugepages per cell,
validated, rendered into domain XML that libvirt's own parser keeps, and applied by the first-boot script."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
import pytest

from numalab.lab.spec import lab_from_dict
from numalab.model.errors import ValidationError
from tests.lab.shapes import REAL_SERVER_NUMA
from tests.lab.test_firstboot_seed import fake_seed, script_part, sh
from tests.lab.test_templates import domain_xml

REAL_SERVER = {"name": "smt", "numa": REAL_SERVER_NUMA}


def lab_with(guest: dict, **settings):  # noqa: ANN201 - a Lab
    return lab_from_dict({"settings": {"name": "t", **settings}, "guests": [guest]})


def test_the_shape_gives_vcpus_sockets_cores_threads_and_cells() -> None:
    guest = lab_with(REAL_SERVER).guests[0]
    assert guest.vcpus == 8 and guest.cpu_topology == (2, 2, 2)
    assert guest.memory == 4 << 30
    assert guest.domain_cells == [
        {"id": 0, "vcpus": "0-3", "memory_kib": 2 << 20},
        {"id": 1, "vcpus": "4-7", "memory_kib": 1536 << 10},
        {"id": 2, "vcpus": "", "memory_kib": 512 << 10},
    ]
    assert guest.boot_shape == 'OFFLINE_CPUS="7"\nHUGEPAGES="0:2048:32"\n'
    assert guest.topology.core_of(6) == {6} and guest.topology.core_of(4) == {4, 5}


def test_the_domain_keeps_threads_and_a_cell_without_cpus() -> None:
    lab = lab_with(REAL_SERVER)
    conn = libvirt.open("test:///default")
    try:
        root = ET.fromstring(conn.defineXML(domain_xml(lab, "smt")).XMLDesc(0))
    finally:
        conn.close()
    topology = root.find("cpu/topology").attrib
    assert (topology["sockets"], topology["cores"], topology["threads"]) == ("2", "2", "2")
    cells = {cell.get("id"): cell.attrib for cell in root.findall("cpu/numa/cell")}
    assert cells["1"]["cpus"] == "4-7" and "cpus" not in cells["2"]
    assert cells["2"]["memory"] == str(512 << 10)
    assert root.find("vcpu").text == "8"


@pytest.mark.parametrize(
    ("numa", "field", "words"),
    [
        ({**REAL_SERVER["numa"], "threads_per_core": None, "cores": ["0,1"]}, "smt.numa.cores",
         "threads consecutively"),
        ({"cells": [{"id": 0, "cpus": "0-1", "offline_cpus": "0", "memory": "1Gi"}]}, "smt.numa.cells",
         "vCPU 0 cannot be taken offline"),
        ({"cells": [{"id": 0, "cpus": "0-1", "memory": "1Gi"}, {"id": 2, "memory": "1Gi"}]}, "smt.numa.cells",
         "numbers cells 0-1 in order"),
        ({"threads_per_core": 2, "cells": [{"id": 0, "cpus": "0-2", "memory": "1Gi"},
                                           {"id": 1, "cpus": "3", "memory": "1Gi"}]},
         "smt.numa.cores", "spans cells"),
        ({"cells": [{"id": 0, "cpus": "0-1", "memory": "1Gi", "hugepages": {"64Ki": 8}}]}, "smt.numa.cells",
         "hugepages 64Ki: an x86 guest has only 2Mi and 1Gi pages"),
    ],
)
def test_shapes_the_lab_cannot_emulate_are_refused(numa: dict, field: str, words: str) -> None:
    numa = {key: value for key, value in numa.items() if value is not None}
    with pytest.raises(ValidationError) as err:
        lab_with({"name": "smt", "numa": numa})
    assert err.value.field == field and words in str(err.value)


def test_a_cloud_image_cannot_apply_offline_cpus_or_hugepages() -> None:
    with pytest.raises(ValidationError, match=r"smt.numa: offline_cpus and hugepages need the lab's own image"):
        lab_with(REAL_SERVER, image="/images/cloud.qcow2")


def test_the_first_boot_script_takes_cpus_offline_and_reserves_hugepages(tmp_path: Path) -> None:
    guest = lab_with(REAL_SERVER).guests[0]
    system = tmp_path / "system"
    (system / "cpu/cpu7").mkdir(parents=True)
    (system / "cpu/cpu7/online").write_text("1\n")
    pages = system / "node/node0/hugepages/hugepages-2048kB"
    pages.mkdir(parents=True)
    (pages / "nr_hugepages").write_text("0\n")
    part = script_part('if [ -f "$seed/numalab-shape" ]', "fi").replace("/sys/devices/system", str(system))
    done = sh(f'set -eu\nseed="{fake_seed(guest, tmp_path)}"\n{part}')
    assert done.returncode == 0, done.stderr
    assert (system / "cpu/cpu7/online").read_text() == "0\n"
    assert (pages / "nr_hugepages").read_text() == "32\n"
    assert "offline vCPUs 7; hugepages 0:2048:32" in done.stdout
