"""LabHost: one lab on one libvirt connection, brought up in order, inspected, and removed.

Everything goes through libvirt-python against the lab's URI, so a remote qemu+ssh:// host works the
same as the local one. LabHost holds the order, the paths and the locks; the objects are handled by
networks (the lab network), storage (pool and volumes), domains (guest domains) and readiness
(waiting for SSH). Every object carries the lab's name (domain and network `<metadata>`, the pool's
name and path) and only objects that carry it are ever changed or removed.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import libvirt

from numalab.files import file_lock
from numalab.lab import keys, seed
from numalab.lab.domains import (
    TCG_SINGLE_EMULATOR,
    describe_shape,
    domain_state,
    domain_type,
    remove_domains,
    single_threaded_tcg,
    tcg_emulator,
)
from numalab.lab.errors import LabError
from numalab.lab.image import Image, Recipe, built_image, cloud_image
from numalab.lab.libvirt_objects import NAMESPACE, lab_of_xml, lookup_or_none
from numalab.lab.networks import check_subnet, ensure_network, remove_network
from numalab.lab.networks import free_subnet as free_subnet  # re-exported: tests and bench pick test subnets
from numalab.lab.readiness import DEFAULT_SSH_TIMEOUT, wait_for_ssh
from numalab.lab.remote import is_local_uri, jump_options, proxy_jump
from numalab.lab.spec import Guest, Lab
from numalab.lab.storage import POOL_ROOT, ensure_overlay, ensure_pool, remove_pool, upload, upload_image
from numalab.progress import say
from numalab.render import render


@dataclass(frozen=True)
class GuestStatus:
    name: str
    domain: str
    state: str  # running, shut off, ... or "absent"
    address: str
    shape: str
    console_log: str


PREPARE_LOCK = "prepare.lock"  # in the lab's state dir: it goes with the lab (it was left in the image dir)
# What the cluster stages keep in the lab's state dir (numalab.deploy): gone with the lab it belongs to.
CLUSTER_STATE = ("pki", "kubeconfig", "wheelhouse", "rke2-token", ".rke2-token.lock", "rke2", "policy-reset.lock")


class LabHost:
    """One lab on one libvirt connection. `prepare` runs once; `ensure_guest` once per guest."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.settings = lab.settings
        self.state_dir = lab.settings.state_dir.expanduser()
        self._lock = threading.Lock()
        self._prepared = False
        self._conn: libvirt.virConnect | None = None
        self._image: Image | None = None

    # ---- paths and names -------------------------------------------------------------------

    @property
    def pool_name(self) -> str:
        return self.settings.object_name

    @property
    def network_name(self) -> str:
        return self.settings.object_name

    @property
    def pool_path(self) -> str:
        return f"{POOL_ROOT}/{self.settings.object_name}"

    @property
    def lab_key(self) -> Path:
        return self.state_dir / "keys" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    def console_log(self, guest: Guest) -> str:
        """Local labs log the serial console into the state dir; remote ones on the libvirt host."""
        if is_local_uri(self.settings.uri):
            return str(self.state_dir / "console" / f"{guest.name}.log")
        return f"{self.pool_path}/{guest.name}-console.log"

    # ---- connection --------------------------------------------------------------------------

    @property
    def conn(self) -> libvirt.virConnect:
        if self._conn is None:
            try:
                self._conn = libvirt.open(self.settings.uri)
            except libvirt.libvirtError as exc:
                raise LabError(
                    f"cannot connect to libvirt at {self.settings.uri}: {exc.get_error_message()} "
                    "(is libvirtd running? scripts/host-prep.sh starts it)"
                ) from None
        return self._conn

    # ---- once per lab ------------------------------------------------------------------------

    def prepare(self) -> None:
        """Keys, known_hosts, ssh_config, network, pool and base image volumes.

        Once per process (a lock shared by pyinfra's greenlets) and serialized across processes on
        this controller (a file lock in the lab's state dir, which `destroy` removes with it), so parallel
        bring-ups never build or upload twice. A subnet that overlaps is refused first, before the state
        dir or anything else is made.
        """
        with self._lock:
            if self._prepared:
                return
            check_subnet(self.conn, self.network_name, self.settings)
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # seeds hold private host keys
            with file_lock(self.state_dir / PREPARE_LOCK):
                self._write_ssh_material()
                ensure_network(self.conn, self.network_name, self.lab)
                ensure_pool(self.conn, self.pool_name, self.pool_path, self.settings.name)
                self._image = self._base_image()
                upload_image(self.conn, self.pool_name, self._image)
                self._prepared = True

    def _write_ssh_material(self) -> None:
        keys.ensure_keypair(self.lab_key, f"numalab-{self.settings.name}")
        entries = []
        for guest in self.lab.guests:
            public = keys.ensure_keypair(self._host_key_path(guest), f"{guest.name}.{self.settings.name}")
            entries.append((str(guest.address), guest.name, public))
        self.known_hosts.write_text(keys.known_hosts_lines(entries))
        self.ssh_config.write_text(
            keys.ssh_config_text(
                [(g.name, str(g.address)) for g in self.lab.guests],
                self.lab_key,
                self.known_hosts,
                proxy_jump(self.settings.uri),
                jump_options(self.settings.uri),
            )
        )

    def _host_key_path(self, guest: Guest) -> Path:
        return self.state_dir / "keys" / "hosts" / f"{guest.name}_ed25519"

    def _base_image(self) -> Image:
        image_dir = self.settings.image_dir.expanduser()
        if self.settings.image:
            return cloud_image(self.settings.image, image_dir)
        return built_image(Recipe(), image_dir)

    # ---- per guest -----------------------------------------------------------------------------

    def ensure_guest(self, guest: Guest) -> None:
        """Overlay, seed and domain of `guest` exist and the domain runs."""
        self.prepare()
        assert self._image is not None
        with self._lock:
            pool = self.conn.storagePoolLookupByName(self.pool_name)
            ensure_overlay(pool, f"{guest.name}.qcow2", self._image)
            seed_name = f"{guest.name}-seed.iso"
            if lookup_or_none(pool.storageVolLookupByName, seed_name) is None:
                iso = self._write_seed(guest)
                upload(self.conn, pool, seed_name, iso)
            domain = lookup_or_none(self.conn.lookupByName, self.lab.domain_name(guest))
            if domain is None:
                domain = self.conn.defineXML(self._domain_xml(guest, pool))
                say(f"{guest.name}: defined domain {domain.name()} ({describe_shape(guest)})")
            elif lab_of_xml(domain.XMLDesc(0)) != self.settings.name:
                raise LabError(
                    f"domain {domain.name()} exists but does not carry lab {self.settings.name}'s metadata; "
                    "refusing to touch it"
                )
            if not domain.isActive():
                if is_local_uri(self.settings.uri):
                    Path(self.console_log(guest)).parent.mkdir(parents=True, exist_ok=True)
                domain.create()
                say(f"{guest.name}: started, waiting for SSH at {guest.address}")

    def _write_seed(self, guest: Guest) -> Path:
        host_key = self._host_key_path(guest)
        files = seed.seed_files(
            self.settings.name,
            guest,
            self.lab_key.with_name(self.lab_key.name + ".pub").read_text().strip(),
            (host_key.read_text(), host_key.with_name(host_key.name + ".pub").read_text()),
            self.settings.subnet.prefixlen,
        )
        iso = self.state_dir / "seeds" / f"{guest.name}.iso"
        seed.write_seed_iso(files, self.state_dir / "seeds" / guest.name, iso)
        return iso

    @cached_property
    def _host_cpus(self) -> int:
        """The libvirt host's CPUs: asked once, not once per guest."""
        return self.conn.getInfo()[2]

    @cached_property
    def _tcg_wrapper(self) -> str | None:
        """tcg_emulator, asked once and only when a guest wants it; its absence is said, not hidden."""
        found = tcg_emulator(self.conn)
        if found is None:
            say(f"guests run multi-threaded TCG: the libvirt host has no {TCG_SINGLE_EMULATOR} "
                "(scripts/host-prep.sh installs it): with more vCPUs than the host's CPUs, guests run slower")
        return found

    def _domain_emulator(self, kind: str, guest: Guest) -> str | None:
        """The guest's <emulator>: the single-threaded TCG wrapper where `single_threaded_tcg` wants it and the
        libvirt host has it, else libvirt's default (None)."""
        lab_vcpus = sum(other.vcpus for other in self.lab.guests)
        if not single_threaded_tcg(kind, guest.vcpus, lab_vcpus, self._host_cpus):
            return None
        return self._tcg_wrapper

    def _domain_xml(self, guest: Guest, pool: libvirt.virStoragePool) -> str:
        assert self._image is not None
        kind = domain_type(self.conn, self.settings)
        tag = self._image.tag
        kernel_path = initrd_path = None
        if self._image.direct_boot:
            kernel_path = pool.storageVolLookupByName(f"vmlinuz-{tag}").path()
            initrd_path = pool.storageVolLookupByName(f"initrd-{tag}.img").path()
        return render(
            "lab/domain.xml.j2",
            domain_type=kind,
            emulator=self._domain_emulator(kind, guest),
            cmdline=self._image.kernel_cmdline(kind),
            domain_name=self.lab.domain_name(guest),
            namespace=NAMESPACE,
            lab=self.lab,
            guest=guest,
            image=self._image,
            kernel_path=kernel_path,
            initrd_path=initrd_path,
            pool=self.pool_name,
            disk_volume=f"{guest.name}.qcow2",
            seed_volume=f"{guest.name}-seed.iso",
            network=self.network_name,
            console_log=self.console_log(guest),
        )

    def wait_for_ssh(self, guest: Guest, timeout: float = DEFAULT_SSH_TIMEOUT) -> float:
        """Block until the guest is ready (see `readiness.wait_for_ssh`); seconds waited."""
        return wait_for_ssh(self, guest, timeout)

    # ---- status and destroy --------------------------------------------------------------------

    def status(self) -> list[GuestStatus]:
        return [
            GuestStatus(
                guest.name,
                self.lab.domain_name(guest),
                domain_state(self.conn, self.lab.domain_name(guest), self.settings.name),
                str(guest.address),
                describe_shape(guest),
                self.console_log(guest),
            )
            for guest in self.lab.guests
        ]

    def destroy(self) -> list[str]:
        """Remove the lab's domains, network, pool with its volumes, and the lab's local files.

        Only objects carrying the lab's metadata (domains, network) or its pool name and path are
        touched; running it again finds nothing and removes nothing.
        """
        removed = remove_domains(self.conn, self.settings.name)
        removed += remove_network(self.conn, self.network_name, self.settings.name)
        removed += remove_pool(self.conn, self.pool_name, self.pool_path, self.settings.name)
        removed += self._remove_local_files()
        self._prepared = False
        return removed

    def _remove_local_files(self) -> list[str]:
        removed = []
        for relative in ("keys", "seeds", "console", "known_hosts", "ssh_config", PREPARE_LOCK, *CLUSTER_STATE):
            path = self.state_dir / relative
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            else:
                continue
            removed.append(f"file {path}")
        if self.state_dir.is_dir() and not any(self.state_dir.iterdir()):
            self.state_dir.rmdir()
            removed.append(f"dir {self.state_dir}")
        return removed


_HOSTS: dict[tuple[str, str], LabHost] = {}
_HOSTS_LOCK = threading.Lock()


def lab_host(lab: Lab) -> LabHost:
    """The process-wide LabHost of a lab, so parallel guests share one preparation."""
    key = (lab.settings.uri, lab.settings.name)
    with _HOSTS_LOCK:
        if key not in _HOSTS or _HOSTS[key].lab != lab:
            _HOSTS[key] = LabHost(lab)
        return _HOSTS[key]
