"""The NoCloud seed of one guest: user-data, meta-data and network-config on an ISO labelled cidata."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from numalab.lab.spec import Guest
from numalab.render import render

SEED_FILES = ("user-data", "meta-data", "network-config")


class SeedError(RuntimeError):
    """No ISO tool, or the tool failed."""


def seed_files(lab_name: str, guest: Guest, authorized_key: str, host_key: tuple[str, str]) -> dict[str, str]:
    """The three NoCloud files; the instance id changes whenever their content does."""
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
    digest = hashlib.sha256((user_data + network_config).encode()).hexdigest()[:12]
    meta_data = render("lab/meta-data.j2", guest=guest, instance_id=f"numalab-{lab_name}-{guest.name}-{digest}")
    return {"user-data": user_data, "meta-data": meta_data, "network-config": network_config}


def write_seed_iso(files: dict[str, str], directory: Path, iso: Path) -> None:
    """Write the files under `directory` and pack them into `iso` with genisoimage or xorriso."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in SEED_FILES:
        (directory / name).write_text(files[name])
    paths = [str(directory / name) for name in SEED_FILES]
    if shutil.which("genisoimage"):
        argv = ["genisoimage", "-quiet", "-output", str(iso), "-volid", "cidata", "-joliet", "-rock", *paths]
    elif shutil.which("xorriso"):
        argv = ["xorriso", "-as", "mkisofs", "-quiet", "-o", str(iso), "-V", "cidata", "-J", "-R", *paths]
    else:
        raise SeedError("neither genisoimage nor xorriso is installed (run scripts/host-prep.sh)")
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SeedError(f"{argv[0]} failed for {iso}: {done.stderr.strip()}")
