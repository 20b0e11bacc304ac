"""The lab image's first boot: the seed's numalab-* files, the script that applies them, and the image recipe
that carries the script (its hash must follow the script, and the host's apt mirror must serve its suite)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numalab.lab import recipe
from numalab.lab.image import ImageBuildError, host_debian_mirror
from numalab.lab.recipe import ROOTFS_TEMPLATES, Recipe
from numalab.lab.seed import FIRSTBOOT_FILES, SEED_FILES, seed_files, write_seed_iso
from numalab.lab.spec import Guest, lab_from_dict

FIRSTBOOT = ROOTFS_TEMPLATES / "numalab-firstboot"
PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----\n"
PUBLIC = "ssh-ed25519 HOSTKEY root@two.t\n"
LAB_KEY = "ssh-ed25519 LABKEY numalab-t"


@pytest.fixture
def guest() -> Guest:
    lab = lab_from_dict({"settings": {"name": "t"}, "guests": [{"name": "two", "vcpus": 2, "memory": "1Gi"}]})
    return lab.guests[0]


def seed(guest: Guest, prefixlen: int = 24) -> dict[str, str]:
    return seed_files("t", guest, LAB_KEY + "\n", (PRIVATE, PUBLIC), prefixlen=prefixlen)


def sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)


def script_part(first: str, last: str) -> str:
    """The lines of the first-boot script from the one starting with `first` to the one starting with `last`."""
    lines = FIRSTBOOT.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i, line in enumerate(lines) if i >= start and line.startswith(last))
    return "\n".join(lines[start : end + 1])


def test_the_seed_holds_the_nocloud_and_the_firstboot_files(guest: Guest) -> None:
    files = seed(guest)
    assert list(files) == [*SEED_FILES, *FIRSTBOOT_FILES]
    assert files["numalab-authorized_keys"] == LAB_KEY + "\n"
    assert files["numalab-ssh_host_ed25519_key"] == PRIVATE
    assert files["numalab-ssh_host_ed25519_key.pub"] == "ssh-ed25519 HOSTKEY\n"  # no comment: no name leaks
    network = files["numalab-network"]
    settings = [line for line in network.splitlines() if line and not line.startswith("#")]
    assert settings == [f"MAC={guest.mac}", f"ADDRESS={guest.address}/24"]
    assert "GATEWAY" not in network


def test_the_network_file_is_what_a_shell_reads(guest: Guest, tmp_path: Path) -> None:
    path = tmp_path / "numalab-network"
    path.write_text(seed(guest, prefixlen=26)["numalab-network"])
    shown = sh(f'. "{path}"; echo $MAC $ADDRESS')
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"{guest.mac} {guest.address}/26\n", "")


def test_the_instance_id_follows_the_firstboot_files(guest: Guest) -> None:
    assert seed(guest)["meta-data"] == seed(guest)["meta-data"]
    assert seed(guest)["meta-data"] != seed(guest, prefixlen=16)["meta-data"]
    other_key = seed_files("t", guest, LAB_KEY, (PRIVATE, "ssh-ed25519 OTHER root@two.t"))
    assert other_key["meta-data"] != seed(guest)["meta-data"]


def test_the_seed_iso_carries_every_file_under_its_name(guest: Guest, tmp_path: Path) -> None:
    files = seed(guest)
    iso = tmp_path / "seed.iso"
    write_seed_iso(files, tmp_path / "seed", iso)
    listed = subprocess.run(["isoinfo", "-R", "-f", "-i", str(iso)], capture_output=True, text=True, check=True)
    assert sorted(listed.stdout.split()) == sorted(f"/{name}" for name in files)
    for name in ("numalab-network", "numalab-ssh_host_ed25519_key.pub"):
        read = subprocess.run(["isoinfo", "-R", "-i", str(iso), "-x", f"/{name}"], capture_output=True, text=True,
                              check=True)
        assert read.stdout == files[name]
    volume = subprocess.run(["isoinfo", "-d", "-i", str(iso)], capture_output=True, text=True, check=True).stdout
    assert "Volume id: cidata" in volume


def test_the_firstboot_script_is_valid_sh() -> None:
    checked = subprocess.run(["sh", "-n", str(FIRSTBOOT)], capture_output=True, text=True, check=False)
    assert (checked.returncode, checked.stderr) == (0, "")
    assert FIRSTBOOT.read_text().startswith("#!/bin/sh\n")


def fake_seed(guest: Guest, tmp_path: Path) -> Path:
    seed_dir = tmp_path / "seed"
    seed_dir.mkdir()
    for name, content in seed(guest).items():
        (seed_dir / name).write_text(content)
    return seed_dir


def fake_net(tmp_path: Path, macs: dict[str, str]) -> Path:
    net = tmp_path / "class-net"
    for name, mac in macs.items():
        (net / name).mkdir(parents=True)
        (net / name / "address").write_text(mac + "\n")
    return net


def run_network_part(seed_dir: Path, net: Path) -> subprocess.CompletedProcess[str]:
    part = script_part('. "$seed/numalab-network"', '[ -n "$iface" ]').replace("/sys/class/net", str(net))
    return sh(f'set -eu\nseed="{seed_dir}"\n{part}\necho "$iface $ADDRESS"')


def test_the_script_finds_the_interface_by_the_seeds_mac(guest: Guest, tmp_path: Path) -> None:
    net = fake_net(tmp_path, {"eth0": "52:54:00:00:00:01", "eth1": guest.mac, "lo": "00:00:00:00:00:00"})
    done = run_network_part(fake_seed(guest, tmp_path), net)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"eth1 {guest.address}/24\n", "")


def test_the_script_stops_when_no_interface_has_the_mac(guest: Guest, tmp_path: Path) -> None:
    net = fake_net(tmp_path, {"eth0": "52:54:00:00:00:01", "lo": "00:00:00:00:00:00"})
    done = run_network_part(fake_seed(guest, tmp_path), net)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"numalab-firstboot: no interface with MAC {guest.mac}\n"


def test_the_script_reads_the_hostname_from_meta_data(guest: Guest, tmp_path: Path) -> None:
    part = script_part("name=$(sed", '[ -n "$name" ]')
    done = sh(f'set -eu\nseed="{fake_seed(guest, tmp_path)}"\n{part}\necho "$name"')
    assert (done.returncode, done.stdout) == (0, "two\n")


def test_the_image_runs_the_script_from_where_the_recipe_puts_it() -> None:
    recipe = Recipe()
    assert recipe.files["usr/local/sbin/numalab-firstboot"] == FIRSTBOOT.read_text()
    assert "usr/local/sbin/numalab-firstboot" in recipe.executables
    unit = recipe.files["etc/systemd/system/numalab-firstboot.service"]
    assert "ExecStart=/usr/local/sbin/numalab-firstboot\n" in unit
    assert "numalab-firstboot.service" in recipe.enabled_units


def test_every_rootfs_template_is_in_the_recipe() -> None:
    """So a change to any of them changes the recipe's hash (and builds a new image)."""
    contents = set(Recipe().files.values())
    for path in sorted(ROOTFS_TEMPLATES.iterdir()):
        assert path.read_text() in contents, f"{path.name} is not written into the image"


def load_recipe_module(root: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a module
    """numalab/lab/recipe.py loaded from a copy under `root`, so it reads root/templates/lab/rootfs."""
    path = root / "numalab" / "lab" / "recipe.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(recipe.__file__, path)
    name = f"recipe_copy_{abs(hash(root))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_recipe_hash_follows_the_rootfs_template_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = tmp_path / "same"
    shutil.copytree(ROOTFS_TEMPLATES, same / "templates" / "lab" / "rootfs")
    assert load_recipe_module(same, monkeypatch).Recipe().digest() == Recipe().digest()
    for template in sorted(p.name for p in ROOTFS_TEMPLATES.iterdir()):
        edited = tmp_path / template
        shutil.copytree(ROOTFS_TEMPLATES, edited / "templates" / "lab" / "rootfs")
        changed = edited / "templates" / "lab" / "rootfs" / template
        changed.write_text(changed.read_text() + "# edited\n")
        assert load_recipe_module(edited, monkeypatch).Recipe().digest() != Recipe().digest(), template


DEB822_BOOKWORM = (
    "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
    "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
)


def apt_dir(tmp_path: Path, sources: str | None = None, sources_list: str | None = None) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    if sources is not None:
        (tmp_path / "sources.list.d" / "debian.sources").write_text(sources)
    if sources_list is not None:
        (tmp_path / "sources.list").write_text(sources_list)
    return tmp_path


def test_a_bookworm_host_serves_the_trixie_image(tmp_path: Path) -> None:
    assert recipe.SUITE == "trixie"
    assert host_debian_mirror(apt_dir(tmp_path, sources=DEB822_BOOKWORM)) == "http://mirror.example/debian"


def test_a_bookworm_sources_list_line_serves_it_too(tmp_path: Path) -> None:
    listed = (
        "deb http://security.example/debian-security bookworm-security main\n"
        "deb [arch=amd64] http://m.example/debian bookworm main\n"
    )
    assert host_debian_mirror(apt_dir(tmp_path, sources_list=listed)) == "http://m.example/debian"


def test_disabled_stanzas_are_skipped(tmp_path: Path) -> None:
    sources = "Types: deb\nURIs: http://off.example/debian\nSuites: trixie\nEnabled: no\n\n" + DEB822_BOOKWORM
    assert host_debian_mirror(apt_dir(tmp_path, sources=sources)) == "http://mirror.example/debian"


@pytest.mark.parametrize(
    "sources",
    [
        "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble noble-updates\nComponents: main\n",
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n",
    ],
    ids=["ubuntu", "security only"],
)
def test_a_host_without_a_debian_release_mirror_is_told_what_to_set(tmp_path: Path, sources: str) -> None:
    with pytest.raises(ImageBuildError, match="build Debian trixie from; set NUMALAB_DEBIAN_MIRROR"):
        host_debian_mirror(apt_dir(tmp_path, sources=sources))
