"""NUMALAB_IMAGE: a guest booted by its image's own bootloader and configured by the NoCloud seed.

The image is built by tests/lab/cloudimage.py (MBR + syslinux + the base image's root filesystem,
cached by recipe) because no real cloud image can be downloaded here. One small guest is brought up
through the real pyinfra CLI with NUMALAB_IMAGE pointing at it; the URL path (download into the
image dir, once) is exercised against an http server on 127.0.0.1.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest
import testinfra
from numa_align.cpulist import format_cpulist

from numalab.lab.image import BASE_DISK, cloud_image
from numalab.lab.settings import DEFAULT_IMAGE_DIR
from tests.lab.cloudimage import cloud_test_image
from tests.lab.conftest import (
    free_subnet,
    lab_env,
    lab_of_inventory_with_env,
    leftovers,
    run_numalab,
    run_pyinfra,
    write_inventory,
)

pytestmark = pytest.mark.lab

GUEST = {
    "name": "cloudy",
    "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "2Gi"}, {"id": 1, "cpus": "1", "memory": "512Mi"}]},
}


def image_dir() -> Path:
    return Path(os.environ.get("NUMALAB_IMAGE_DIR") or DEFAULT_IMAGE_DIR).expanduser()


@pytest.fixture(scope="module")
def cloud_disk() -> Path:
    started = time.monotonic()
    disk = cloud_test_image(image_dir())
    print(f"cloud test image ready in {time.monotonic() - started:.1f} s: {disk}")
    return disk


def test_guest_boots_a_cloud_image_by_its_own_bootloader(cloud_disk: Path, tmp_path: Path) -> None:
    env = lab_env(f"pytest-cloud-{os.getpid()}", tmp_path / "state", free_subnet())
    env["NUMALAB_IMAGE"] = str(cloud_disk)
    inventory = write_inventory(tmp_path / "inventory.py", [GUEST])
    lab = lab_of_inventory_with_env(inventory, env)
    guest = lab.guest("cloudy")
    try:
        result = run_pyinfra(inventory, env, "exec", "--", "cat", "/sys/devices/system/node/online")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "[@kvm/cloudy] 0-1" in result.stdout + result.stderr

        conn = libvirt.open(lab.settings.uri)
        try:
            root = ET.fromstring(conn.lookupByName(lab.domain_name(guest)).XMLDesc(0))
        finally:
            conn.close()
        assert root.find("./os/kernel") is None and root.find("./os/boot").get("dev") == "hd"

        host = testinfra.get_host("ssh://cloudy", ssh_config=str(lab.settings.state_dir / "ssh_config"))
        # syslinux puts BOOT_IMAGE first: the kernel came from the disk's bootloader, root from partition 2.
        cmdline = host.file("/proc/cmdline").content_string.split()
        assert cmdline[0] == "BOOT_IMAGE=/vmlinuz" and "root=/dev/vda2" in cmdline and "panic=5" in cmdline
        assert host.check_output("findmnt -no SOURCE /") == "/dev/vda2"
        assert host.check_output("hostname") == "cloudy"  # from the seed
        assert "DataSourceNoCloud" in host.file("/run/cloud-init/status.json").content_string
        node_dir = "/sys/devices/system/node"
        assert host.file(f"{node_dir}/online").content_string.strip() == format_cpulist(guest.topology.ids)
        for cell in guest.topology.cells:
            assert host.file(f"{node_dir}/node{cell.id}/cpulist").content_string.strip() == cell.cpulist
            meminfo = host.file(f"{node_dir}/node{cell.id}/meminfo").content_string
            kib = int(next(line for line in meminfo.splitlines() if "MemTotal:" in line).split()[-2])
            assert abs(kib - cell.memory // 1024) <= cell.memory // 1024 * 0.05, (cell.id, kib)
        generated = (lab.settings.state_dir / "keys" / "hosts" / "cloudy_ed25519.pub").read_text().split()[:2]
        assert host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2] == generated
        assert f"{guest.address},cloudy {' '.join(generated)}" in (lab.settings.state_dir / "known_hosts").read_text()
    finally:
        destroyed = run_numalab(inventory, env, "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert leftovers(lab) == []


class _CountingHandler(http.server.SimpleHTTPRequestHandler):
    gets: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.gets.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
        pass


@pytest.fixture
def image_server(cloud_disk: Path) -> Iterator[tuple[str, list[str]]]:
    gets: list[str] = []
    handler = type("Handler", (_CountingHandler,), {"gets": gets})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(cloud_disk.parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{cloud_disk.name}", gets
    finally:
        server.shutdown()
        server.server_close()


def test_image_url_is_downloaded_once_into_the_image_dir(
    cloud_disk: Path, image_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, gets = image_server
    try:
        first = cloud_image(url, tmp_path / "images")
        second = cloud_image(url, tmp_path / "images")
        assert first == second and first.disk.name == BASE_DISK and not first.direct_boot
        assert gets == [f"/{cloud_disk.name}"]
        assert _sha256(first.disk) == _sha256(cloud_disk)
        assert [p.name for p in first.disk.parent.iterdir()] == [BASE_DISK]
    finally:
        shutil.rmtree(tmp_path / "images", ignore_errors=True)  # a copy of the image: not kept by pytest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
