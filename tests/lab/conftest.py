"""The session's KVM lab: two NUMA guests brought up once through the real pyinfra CLI.

Fixture `kvm_lab` (session scope) writes a small inventory in a temp dir, runs
`pyinfra -y INVENTORY deploys/cluster.py` (which starts the guests through the @kvm connector and
applies the base stage), and yields a `RunningLab`. Its `guests` map a name to a `LabGuest` with
`name`, `address`, `ssh_config` (a path for `ssh -F`), `host` (a testinfra host over that SSH config)
and `topology` (the model's Topology declared for the guest). Other suites' lab tests can use it:

    @pytest.mark.lab
    def test_probe(kvm_lab):
        guest = kvm_lab.guests["three"]
        assert guest.host.run("numactl --hardware").succeeded

Teardown runs `numalab lab destroy` and checks nothing of the lab is left. The base image is built
once (and kept across runs under ~/.local/share/numa-lab/images, keyed by its recipe hash).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libvirt
import pytest
import testinfra

from numalab.lab import provisioning
from numalab.lab.inventory import lab_of_inventory
from numalab.lab.provisioning import POOL_ROOT, lab_of_xml
from numalab.lab.spec import Lab
from numalab.model.topology import Topology
from tests.lab.consoles import keep_consoles, note_lab, pytest_runtest_makereport, pytest_runtest_setup  # noqa: F401  (hooks)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEPLOY = REPO / "deploys" / "cluster.py"

# Small guests: one with 2 cells, one with 3 cells of uneven memory and a distance of 30. Node 0 holds
# the guest kernel (~40 MiB, KASLR off), so it gets 2 GiB to keep its MemTotal within 5 %.
TEST_GUESTS: list[dict[str, Any]] = [
    {
        "name": "two",
        "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "2Gi"}, {"id": 1, "cpus": "1", "memory": "512Mi"}]},
    },
    {
        "name": "three",
        "numa": {
            "cells": [
                {"id": 0, "cpus": "0", "memory": "2Gi"},
                {"id": 1, "cpus": "1", "memory": "768Mi"},
                {"id": 2, "cpus": "2", "memory": "512Mi"},
            ],
            "distances": [[10, 20, 30], [20, 10, 20], [30, 20, 10]],
        },
    },
]


@dataclass(frozen=True)
class LabGuest:
    name: str
    address: str
    ssh_config: Path
    host: Any  # testinfra.host.Host
    topology: Topology


@dataclass
class RunningLab:
    lab: Lab
    inventory: Path
    env: dict[str, str]
    guests: dict[str, LabGuest] = field(default_factory=dict)
    first_run: subprocess.CompletedProcess[str] | None = None

    def pyinfra(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_pyinfra(self.inventory, self.env, *args)

    def numalab(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_numalab(self.inventory, self.env, *args)


def write_inventory(path: Path, guests: list[dict[str, Any]], host_overrides: Mapping[str, Any] | None = None) -> Path:
    """An inventory like inventories/kvm.py: guests as data, settings from the environment."""
    path.write_text(
        textwrap.dedent(
            f"""
            import os

            from numalab.lab.inventory import pyinfra_groups
            from numalab.lab.settings import settings_from_env
            from numalab.lab.spec import lab_from_dict

            _lab = lab_from_dict({{"settings": settings_from_env(os.environ).to_dict(), "guests": {guests!r}}})
            lab_guests = [(name, {{**data, **{dict(host_overrides or {})!r}}}) for name, data in
                          pyinfra_groups(_lab)["lab_guests"]]
            """
        )
    )
    return path


KEPT = ("NUMALAB_IMAGE_DIR", "NUMALAB_CPU_SHARES")
"""The NUMALAB_* variables a test lab keeps from the environment: the shared image cache, and the guests' CPU
weight (a machine shared with other guests)."""


def lab_env(name: str, state_dir: Path, subnet: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_") or k in KEPT}
    env.update(NUMALAB_NAME=name, NUMALAB_STATE_DIR=str(state_dir), NUMALAB_SUBNET=subnet, NUMALAB_NETWORK="isolated")
    return env


def run_pyinfra(
    inventory: Path, env: Mapping[str, str], *args: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "pyinfra"), "-y", str(inventory), *args],
        env=dict(env),
        cwd=inventory.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_numalab(inventory: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`numalab lab ...`; before a destroy, the guests' console logs are copied out of the state dir
    so a failure can still show them."""
    if args[:1] == ("destroy",) and env.get("NUMALAB_STATE_DIR"):
        keep_consoles(Path(env["NUMALAB_STATE_DIR"]))
    return subprocess.run(
        [str(BIN / "numalab"), "lab", *args, "--inventory", str(inventory)],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
    )


# `make test` runs the cluster test beside the other tests (scripts/test-side-by-side): each run picks its
# labs' subnets from its own offsets, so two labs coming up at once never both take the /24 that neither
# has defined yet. Within one run, labs come up one after another.
SUBNET_OFFSETS = (2, 199)
CLUSTER_SUBNET_OFFSETS = (200, 249)


def free_subnet(offsets: tuple[int, int] = SUBNET_OFFSETS) -> str:
    """A /24 near the default lab subnet, at `offsets` from it, that overlaps no host route and no libvirt
    network."""
    return provisioning.free_subnet("qemu:///system", first=offsets[0], last=offsets[1])


def leftovers(lab: Lab) -> list[str]:
    """Everything of `lab` that still exists: libvirt objects, the pool directory, local state."""
    found = []
    conn = libvirt.open(lab.settings.uri)
    try:
        found += [f"domain {d.name()}" for d in conn.listAllDomains(0) if lab_of_xml(d.XMLDesc(0)) == lab.settings.name]
        found += [f"network {n.name()}" for n in conn.listAllNetworks(0) if n.name() == lab.settings.object_name]
        found += [f"pool {p.name()}" for p in conn.listAllStoragePools(0) if p.name() == lab.settings.object_name]
    finally:
        conn.close()
    old_lock = lab.settings.image_dir.expanduser() / f"{lab.settings.object_name}.prepare.lock"
    if old_lock.exists():  # where a bring-up's lock used to be left for good, one per lab ever brought up
        found.append(f"lock {old_lock}")
    pool_dir = Path(POOL_ROOT) / lab.settings.object_name
    if pool_dir.exists():
        found.append(f"dir {pool_dir}")
    if lab.settings.state_dir.expanduser().exists():
        found.append(f"state dir {lab.settings.state_dir}")
    return found


@pytest.fixture(scope="session")
def kvm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    workdir = tmp_path_factory.mktemp("kvm-lab")
    env = lab_env(f"pytest-{os.getpid()}", workdir / "state", free_subnet())
    inventory = write_inventory(workdir / "inventory.py", TEST_GUESTS)
    lab = lab_of_inventory_with_env(inventory, env)
    note_lab(lab.settings.state_dir.expanduser(), session=True)
    running = RunningLab(lab, inventory, env)
    control = Path(tempfile.mkdtemp(prefix="numalab-ssh-"))  # one SSH connection per guest, not per check
    try:
        running.first_run = running.pyinfra(str(DEPLOY))
        assert running.first_run.returncode == 0, running.first_run.stdout + running.first_run.stderr
        ssh_config = lab.settings.state_dir / "ssh_config"
        for guest in lab.guests:
            host = testinfra.get_host(f"ssh://{guest.name}", ssh_config=str(ssh_config),
                                      controlpath=str(control / "%%C"))
            running.guests[guest.name] = LabGuest(guest.name, str(guest.address), ssh_config, host, guest.topology)
        yield running
    finally:
        destroyed = running.numalab("destroy")
        again = running.numalab("destroy")
        left = leftovers(lab)
        shutil.rmtree(control, ignore_errors=True)
    assert destroyed.returncode == 0, destroyed.stderr
    assert "removed domain" in destroyed.stdout and "removed network" in destroyed.stdout
    assert again.returncode == 0 and "nothing to remove" in again.stdout, again.stdout + again.stderr
    assert left == [], f"lab objects left after destroy: {left}"


def lab_of_inventory_with_env(inventory: Path, env: Mapping[str, str]) -> Lab:
    """Read the lab back from the inventory with the test's NUMALAB_* environment."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        lab = lab_of_inventory(inventory)
        note_lab(lab.settings.state_dir.expanduser())
        return lab
    finally:
        os.environ.clear()
        os.environ.update(saved)
