"""The NoCloud seed of one guest: user-data, meta-data and network-config on an ISO labelled cidata.

Cloud images read the three NoCloud files with cloud-init. The lab's own image has no cloud-init: its
first-boot unit (templates/lab/rootfs/numalab-firstboot) reads meta-data and the `numalab-*` files of
the same seed, which hold the same keys and the guest's fixed address as plain files.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from numalab.lab.spec import Guest
from numalab.render import render

SEED_FILES = ("user-data", "meta-data", "network-config")
FIRSTBOOT_FILES = (
    "numalab-authorized_keys",
    "numalab-ssh_host_ed25519_key",
    "numalab-ssh_host_ed25519_key.pub",
    "numalab-network",
    "numalab-shape",
)


class SeedError(RuntimeError):
    """No ISO tool, or the tool failed."""


def seed_files(
    lab_name: str,
    guest: Guest,
    authorized_key: str,
    host_key: tuple[str, str],
    prefixlen: int = 24,
) -> dict[str, str]:
    """The NoCloud files and the first-boot files; the instance id changes whenever their content does.

    `prefixlen` is the lab subnet's prefix length (the guest's address comes with the guest).
    """
    private, public = host_key
    user_data = render(
        "lab/user-data.j2",
        guest=guest,
        lab_name=lab_name,
        authorized_key=authorized_key,
        host_key_private=private.strip(),
        host_key_public=" ".join(public.split()[:2]),
    )
    network_config = render("lab/network-config.j2", guest=guest)
    firstboot = {
        "numalab-authorized_keys": authorized_key.strip() + "\n",
        "numalab-ssh_host_ed25519_key": private.strip() + "\n",
        "numalab-ssh_host_ed25519_key.pub": " ".join(public.split()[:2]) + "\n",
        "numalab-network": render("lab/numalab-network.env.j2", guest=guest, prefixlen=prefixlen),
        "numalab-shape": guest.boot_shape,
    }
    content = user_data + network_config + "".join(firstboot.values())
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    meta_data = render("lab/meta-data.j2", guest=guest, instance_id=f"numalab-{lab_name}-{guest.name}-{digest}")
    return {"user-data": user_data, "meta-data": meta_data, "network-config": network_config, **firstboot}


def write_seed_iso(files: dict[str, str], directory: Path, iso: Path) -> None:
    """Write the files under `directory` and pack them into `iso` with genisoimage or xorriso."""
    directory.mkdir(parents=True, exist_ok=True)
    names = [name for name in (*SEED_FILES, *FIRSTBOOT_FILES) if name in files]
    for name in names:
        (directory / name).write_text(files[name])
    paths = [str(directory / name) for name in names]
    if shutil.which("genisoimage"):
        argv = ["genisoimage", "-quiet", "-output", str(iso), "-volid", "cidata", "-joliet", "-rock", *paths]
    elif shutil.which("xorriso"):
        argv = ["xorriso", "-as", "mkisofs", "-quiet", "-o", str(iso), "-V", "cidata", "-J", "-R", *paths]
    else:
        raise SeedError("neither genisoimage nor xorriso is installed (run scripts/host-prep.sh)")
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SeedError(f"{argv[0]} failed for {iso}: {done.stderr.strip()}")
