"""Domain, network and cloud-init files rendered for a lab, checked by libvirt's own parser.

libvirt's `test:///default` driver parses and validates XML exactly like the real daemon but starts
nothing, so these tests need no VM and no libvirtd.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
import pytest
import yaml

from numalab.lab.domains import describe_shape
from numalab.lab.image import Image, ImageBuildError, Recipe, cloud_image, host_debian_mirror
from numalab.lab.keys import known_hosts_lines, ssh_config_text
from numalab.lab.libvirt_objects import NAMESPACE, lab_of_xml
from numalab.lab.seed import seed_files
from numalab.lab.spec import Lab, lab_from_dict
from numalab.render import render

THREE_CELLS = {
    "name": "three",
    "numa": {
        "cells": [
            {"id": 0, "cpus": "0", "memory": "2Gi"},
            {"id": 1, "cpus": "1-2", "memory": "768Mi"},
            {"id": 2, "cpus": "3", "memory": "512Mi"},
        ],
        "distances": [[10, 20, 30], [20, 10, 20], [30, 20, 10]],
    },
}
TWO_CELLS = {
    "name": "two",
    "numa": {"cells": [{"id": 0, "cpus": "0-1", "memory": "1Gi"}, {"id": 1, "cpus": "2-3", "memory": "1Gi"}]},
}


@pytest.fixture
def lab() -> Lab:
    return lab_from_dict({"settings": {"name": "t"}, "guests": [THREE_CELLS, TWO_CELLS]})


@pytest.fixture
def test_conn() -> libvirt.virConnect:
    conn = libvirt.open("test:///default")
    yield conn
    conn.close()


def domain_xml(lab: Lab, name: str, domain_type: str = "qemu", image: Image | None = None,
               emulator: str | None = None) -> str:
    guest = lab.guest(name)
    image = image or Image(Path("/pool/base.qcow2"), Path("/pool/vmlinuz"), Path("/pool/initrd.img"))
    return render(
        "lab/domain.xml.j2",
        domain_type=domain_type,
        emulator=emulator,
        cmdline=image.kernel_cmdline(domain_type),
        domain_name=lab.domain_name(guest),
        namespace=NAMESPACE,
        lab=lab,
        guest=guest,
        image=image,
        kernel_path="/pool/vmlinuz",
        initrd_path="/pool/initrd.img",
        pool="numalab-t",
        disk_volume=f"{name}.qcow2",
        seed_volume=f"{name}-seed.iso",
        network="numalab-t",
        console_log=f"/state/console/{name}.log",
    )


def test_domain_cells_distances_and_topology_survive_libvirt(lab: Lab, test_conn: libvirt.virConnect) -> None:
    domain = test_conn.defineXML(domain_xml(lab, "three"))
    root = ET.fromstring(domain.XMLDesc(0))
    cells = root.findall("./cpu/numa/cell")
    assert [(c.get("id"), c.get("cpus"), c.get("memory"), c.get("unit")) for c in cells] == [
        ("0", "0", str(2 * 1024 * 1024), "KiB"),
        ("1", "1-2", str(768 * 1024), "KiB"),
        ("2", "3", str(512 * 1024), "KiB"),
    ]
    rows = [[int(s.get("value")) for s in c.findall("./distances/sibling")] for c in cells]
    assert rows == [[10, 20, 30], [20, 10, 20], [30, 20, 10]]
    topology = root.find("./cpu/topology")
    assert (topology.get("sockets"), topology.get("cores"), topology.get("threads")) == ("1", "4", "1")
    assert root.findtext("vcpu") == "4"
    assert root.get("type") == "qemu"
    assert lab_of_xml(domain.XMLDesc(0)) == "t"


def test_even_cells_become_sockets_and_default_distances_are_left_out(lab: Lab, test_conn) -> None:
    root = ET.fromstring(test_conn.defineXML(domain_xml(lab, "two", domain_type="kvm")).XMLDesc(0))
    topology = root.find("./cpu/topology")
    assert (topology.get("sockets"), topology.get("cores")) == ("2", "2")
    assert root.find("./cpu/numa/cell/distances") is None
    assert root.find("./cpu").get("mode") == "host-passthrough"


def test_direct_kernel_boot_and_devices(lab: Lab) -> None:
    root = ET.fromstring(domain_xml(lab, "two"))
    assert root.findtext("./os/kernel") == "/pool/vmlinuz"
    assert "root=/dev/vda" in root.findtext("./os/cmdline")
    # a boot-time panic reboots, not hangs, and an Oops (software emulation's int3 ones) is a panic
    assert {"panic=5", "oops=panic"} <= set(root.findtext("./os/cmdline").split())
    # software emulation's TSC is one host clock for every vCPU: trusted, so the guest does not fall back to
    # the HPET; with hardware virtualization the kernel decides for itself
    assert "tsc=reliable" in root.findtext("./os/cmdline").split()
    assert "tsc=reliable" not in ET.fromstring(domain_xml(lab, "two", domain_type="kvm")).findtext("./os/cmdline")
    assert root.find("./devices/emulator") is None  # libvirt's default QEMU unless one is given
    disks = root.findall("./devices/disk")
    assert [(d.find("target").get("dev"), d.find("target").get("bus")) for d in disks] == [
        ("vda", "virtio"),
        ("vdb", "virtio"),
    ]
    assert disks[1].find("readonly") is not None
    assert root.find("./devices/interface/model").get("type") == "virtio"
    assert root.find("./devices/interface/mac").get("address") == lab.guest("two").mac
    assert root.find("./devices/serial/log").get("file") == "/state/console/two.log"


def test_cloud_image_boots_from_its_disk(lab: Lab) -> None:
    root = ET.fromstring(domain_xml(lab, "two", image=Image(Path("/images/cloud.qcow2"))))
    assert root.find("./os/kernel") is None
    assert root.find("./os/boot").get("dev") == "hd"


@pytest.mark.parametrize("mode", ["isolated", "nat"])
def test_network_has_dhcp_hosts_and_forwards_only_for_nat(mode: str, test_conn) -> None:
    lab = lab_from_dict({"settings": {"name": "t", "network": mode}, "guests": [THREE_CELLS, TWO_CELLS]})
    xml = render("lab/network.xml.j2", name="numalab-t", namespace=NAMESPACE, settings=lab.settings, guests=lab.guests)
    root = ET.fromstring(test_conn.networkDefineXML(xml).XMLDesc(0))
    assert (root.find("forward") is not None) == (mode == "nat")
    assert root.find("./ip").get("address") == "10.77.0.1"
    hosts = {h.get("name"): (h.get("mac"), h.get("ip")) for h in root.findall("./ip/dhcp/host")}
    assert hosts == {g.name: (g.mac, str(g.address)) for g in lab.guests}
    assert root.find("bridge").get("name") == lab.settings.bridge
    assert lab_of_xml(ET.tostring(root, encoding="unicode")) == "t"


def test_seed_carries_hostname_keys_and_mac_matched_dhcp(lab: Lab) -> None:
    guest = lab.guest("three")
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----\n"
    files = seed_files("t", guest, "ssh-ed25519 LABKEY numalab-t", (private, "ssh-ed25519 HOSTKEY three.t\n"))
    user_data = yaml.safe_load(files["user-data"])
    assert files["user-data"].startswith("#cloud-config\n")
    assert user_data["hostname"] == "three"
    assert user_data["ssh_authorized_keys"] == ["ssh-ed25519 LABKEY numalab-t"]
    assert user_data["ssh_keys"] == {"ed25519_private": private, "ed25519_public": "ssh-ed25519 HOSTKEY"}
    assert user_data["disable_root"] is False and user_data["ssh_pwauth"] is False
    meta = yaml.safe_load(files["meta-data"])
    assert meta["local-hostname"] == "three" and meta["instance-id"].startswith("numalab-t-three-")
    network = yaml.safe_load(files["network-config"])
    assert network["ethernets"]["eth0"] == {"match": {"macaddress": guest.mac}, "set-name": "eth0", "dhcp4": True}


def test_known_hosts_and_ssh_config_pin_the_generated_host_keys(tmp_path: Path) -> None:
    text = known_hosts_lines([("10.77.0.10", "two", "ssh-ed25519 AAAAkey two.t")])
    assert text == "10.77.0.10,two ssh-ed25519 AAAAkey\n"
    config = ssh_config_text([("two", "10.77.0.10")], tmp_path / "id", tmp_path / "known_hosts", "root@vmhost")
    assert "StrictHostKeyChecking yes" in config
    assert f"UserKnownHostsFile {tmp_path / 'known_hosts'}" in config
    assert "ProxyJump root@vmhost" in config


def test_describe_shape(lab: Lab) -> None:
    assert describe_shape(lab.guest("two")) == "2 cells: 0-1/1024Mi 2-3/1024Mi"
    assert describe_shape(lab.guest("three")).endswith("distances 10,20,30;20,10,20;30,20,10")


def test_host_debian_mirror_from_deb822_and_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert host_debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("# comment\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert host_debian_mirror(tmp_path) == "http://other.example/debian"


def test_recipe_digest_names_the_content() -> None:
    assert Recipe().digest() == Recipe().digest()
    assert Recipe(extra_packages=("containerd",)).digest() != Recipe().digest()
    changed_files = dict(Recipe().files, **{"etc/motd": "lab\n"})
    assert Recipe(files=changed_files).digest() != Recipe().digest()


def test_cloud_image_from_a_local_path(tmp_path: Path) -> None:
    disk = tmp_path / "cloud.qcow2"
    disk.write_bytes(b"QFI\xfb")
    image = cloud_image(str(disk), tmp_path / "images")
    assert (image.disk, image.direct_boot) == (disk, False)
    with pytest.raises(ImageBuildError, match="neither an http"):
        cloud_image(str(tmp_path / "missing.qcow2"), tmp_path / "images")


def test_guests_keep_one_cpu_quota_for_life_so_the_cfs_bandwidth_key_never_flips() -> None:
    """Under software emulation a guest oopsed (int3 in enqueue_entity) patching that key as pods came and went."""
    recipe = Recipe()
    unit = recipe.files["etc/systemd/system/numalab-cfs-key.service"]
    assert "numalab-cfs-key.service" in recipe.enabled_units
    assert "CPUQuota=" in unit and "ExecStart=/bin/sleep infinity" in unit


def test_a_given_emulator_is_the_domains_own(lab: Lab, test_conn: libvirt.virConnect) -> None:
    xml = domain_xml(lab, "two", emulator="/usr/local/libexec/numa-lab/qemu-tcg-single")
    root = ET.fromstring(test_conn.defineXML(xml).XMLDesc(0))
    assert root.findtext("./devices/emulator") == "/usr/local/libexec/numa-lab/qemu-tcg-single"


def test_a_labs_cpu_shares_weigh_its_guests(test_conn: libvirt.virConnect) -> None:
    """NUMALAB_CPU_SHARES: <cputune><shares> on every guest, as libvirt keeps it; none without it."""
    light = lab_from_dict({"settings": {"name": "t", "cpu_shares": 256}, "guests": [TWO_CELLS]})
    root = ET.fromstring(test_conn.defineXML(domain_xml(light, "two")).XMLDesc(0))
    assert root.findtext("./cputune/shares") == "256"
    plain = lab_from_dict({"settings": {"name": "u"}, "guests": [TWO_CELLS]})
    assert ET.fromstring(test_conn.defineXML(domain_xml(plain, "two")).XMLDesc(0)).find("./cputune") is None
