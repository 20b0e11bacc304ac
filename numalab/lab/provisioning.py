"""Making a lab's libvirt objects exist: network, storage pool, base image, overlays, seeds, domains.

Everything goes through libvirt-python against the lab's URI, so a remote qemu+ssh:// host works the
same as the local one: disks, kernels and seeds are uploaded into a storage pool owned by the lab.
Every object carries the lab's name (domain and network `<metadata>`, the pool's name and path) and
only objects that carry it are ever changed or removed.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import libvirt

from numalab.lab import keys, seed
from numalab.lab.image import Image, Recipe, built_image, cloud_image
from numalab.lab.locking import file_lock
from numalab.lab.spec import DEFAULT_SUBNET, Guest, Lab, check_subnet_free
from numalab.model.errors import ValidationError
from numalab.progress import say
from numalab.render import render

log = logging.getLogger(__name__)

NAMESPACE = "urn:numa-lab:lab"
POOL_ROOT = "/var/lib/libvirt/images"
SSH_PORT = 22
DEFAULT_SSH_TIMEOUT = 600.0
UPLOAD_CHUNK = 1 << 20


def _quiet_libvirt(_context: object, _error: object) -> None:
    """libvirt prints every error to stderr by default; here they arrive as exceptions instead."""


libvirt.registerErrorHandler(_quiet_libvirt, None)


class LabError(RuntimeError):
    """The lab cannot be brought up or inspected; the message says what to do next."""


class SSHTimeout(LabError):
    """A guest did not reach SSH in time; the message names its console log."""


@dataclass(frozen=True)
class GuestStatus:
    name: str
    domain: str
    state: str  # running, shut off, ... or "absent"
    address: str
    shape: str
    console_log: str


def is_local_uri(uri: str) -> bool:
    return urllib.parse.urlparse(uri).hostname in (None, "", "localhost")


JUMP_ALIAS = "libvirt-host.numalab"  # a dot: never a guest name, so its ssh_config block matches no guest


def proxy_jump(uri: str) -> str | None:
    """The ssh hop for guests of a remote libvirt host (they sit on that host's lab bridge).

    An alias defined in the lab's ssh_config by `jump_options`, not `user@host:port`: plain `ssh`
    takes no port in its destination, and the hop needs the key and known_hosts of the URI.
    """
    return None if is_local_uri(uri) else JUMP_ALIAS


def jump_options(uri: str) -> dict[str, str] | None:
    """ssh_config options of the hop to a remote libvirt host, from its URI.

    Host, user and port come from the URI; libvirt's `keyfile`, `known_hosts` and `no_verify`
    parameters, when present, give the hop the same key and host key checking as libvirt's own
    connection (without them ssh's defaults apply: ~/.ssh keys and known_hosts, strict checking).
    """
    if is_local_uri(uri):
        return None
    parsed = urllib.parse.urlparse(uri)
    params = dict(urllib.parse.parse_qsl(parsed.query))
    options = {"HostName": str(parsed.hostname)}
    if parsed.port:
        options["Port"] = str(parsed.port)
    if parsed.username:
        options["User"] = parsed.username
    if params.get("keyfile"):
        options["IdentityFile"] = params["keyfile"]
        options["IdentitiesOnly"] = "yes"
    if params.get("known_hosts"):
        options["UserKnownHostsFile"] = params["known_hosts"]
    options["StrictHostKeyChecking"] = "no" if params.get("no_verify", "0") not in ("", "0") else "yes"
    options["BatchMode"] = "yes"
    options["ConnectTimeout"] = "10"
    return options


def describe_shape(guest: Guest) -> str:
    """One line like `2 cells: 0-1/2Gi 2-3/2Gi` plus non-default distances."""
    topo = guest.topology
    cells = " ".join(f"{cell.cpulist}/{cell.memory // (1 << 20)}Mi" for cell in topo.cells)
    text = f"{len(topo.cells)} cell{'s' if len(topo.cells) > 1 else ''}: {cells}"
    if topo.distances is not None and not topo.has_default_distances:
        rows = ";".join(",".join(str(topo.distance(a, b)) for b in topo.ids) for a in topo.ids)
        text += f" distances {rows}"
    return text


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

    def domain_type(self) -> str:
        """auto: kvm only with hardware virtualization (vmx/svm) and a usable /dev/kvm, else qemu."""
        wanted = self.settings.domain_type
        if wanted != "auto":
            return wanted
        if is_local_uri(self.settings.uri):
            flags = Path("/proc/cpuinfo").read_text()
            hardware = re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, flags=re.M) is not None
            return "kvm" if hardware and _kvm_usable() else "qemu"
        caps = ET.fromstring(self.conn.getCapabilities())
        features = {f.get("name") for f in caps.iterfind("./host/cpu/feature")}
        has_kvm = caps.find("./guest/arch/domain[@type='kvm']") is not None
        return "kvm" if has_kvm and features & {"vmx", "svm"} else "qemu"

    # ---- once per lab ------------------------------------------------------------------------

    def prepare(self) -> None:
        """Keys, known_hosts, ssh_config, network, pool and base image volumes.

        Once per process (a lock shared by pyinfra's greenlets) and serialized across processes on
        this controller (a file lock), so parallel bring-ups never build or upload twice.
        """
        lock_file = self.settings.image_dir.expanduser() / f"{self.settings.object_name}.prepare.lock"
        with self._lock, file_lock(lock_file):
            if self._prepared:
                return
            self._check_subnet()
            self._write_ssh_material()
            self._ensure_network()
            self._ensure_pool()
            self._image = self._base_image()
            self._upload_image(self._image)
            self._prepared = True

    def _write_ssh_material(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # seeds hold private host keys
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

    def network_routes(self) -> list[tuple[str, str]]:
        """Host routes (local URIs) and the subnets of the host's other libvirt networks."""
        return network_routes(self.conn, self.settings.uri, exclude_network=self.network_name)

    def _check_subnet(self) -> None:
        """Before anything is created: a new lab network must not overlap any route or network."""
        if self._lookup(self.conn.networkLookupByName, self.network_name) is None:
            check_subnet_free(
                self.settings.subnet, self.network_routes(), self.settings.bridge, where="NUMALAB_SUBNET"
            )

    def _ensure_network(self) -> None:
        net = self._lookup(self.conn.networkLookupByName, self.network_name)
        if net is None:
            xml = render(
                "lab/network.xml.j2",
                name=self.network_name,
                namespace=NAMESPACE,
                settings=self.settings,
                guests=self.lab.guests,
            )
            net = self.conn.networkDefineXML(xml)
            log.info("defined network %s", self.network_name)
        else:
            self._require_owned_network(net)
            self._add_missing_dhcp_hosts(net)
        if not net.isActive():
            net.create()

    def _require_owned_network(self, net: libvirt.virNetwork) -> None:
        if lab_of_xml(net.XMLDesc()) != self.settings.name:
            raise LabError(
                f"libvirt network {net.name()} exists but does not carry lab {self.settings.name}'s "
                "metadata; refusing to touch it (rename the lab with NUMALAB_NAME)"
            )

    def _add_missing_dhcp_hosts(self, net: libvirt.virNetwork) -> None:
        """Guests added to the inventory after the network was defined get their DHCP host entry."""
        root = ET.fromstring(net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE))
        present = {h.get("mac") for h in root.iterfind("./ip/dhcp/host")}
        for guest in self.lab.guests:
            if guest.mac in present:
                continue
            flags = libvirt.VIR_NETWORK_UPDATE_AFFECT_CONFIG
            if net.isActive():
                flags |= libvirt.VIR_NETWORK_UPDATE_AFFECT_LIVE
            entry = f"<host mac='{guest.mac}' name='{guest.name}' ip='{guest.address}'/>"
            net.update(
                libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST, -1, entry, flags
            )

    def _ensure_pool(self) -> libvirt.virStoragePool:
        pool = self._lookup(self.conn.storagePoolLookupByName, self.pool_name)
        if pool is None:
            pool = self.conn.storagePoolDefineXML(render("lab/pool.xml.j2", name=self.pool_name, path=self.pool_path))
            pool.build(0)
        else:
            self._require_owned_pool(pool)
        if not pool.isActive():
            pool.create(0)
        return pool

    def _require_owned_pool(self, pool: libvirt.virStoragePool) -> None:
        path = ET.fromstring(pool.XMLDesc()).findtext("./target/path")
        if path != self.pool_path:
            raise LabError(
                f"storage pool {pool.name()} exists at {path}, not at {self.pool_path}: it is not lab "
                f"{self.settings.name}'s; refusing to touch it"
            )

    def _base_image(self) -> Image:
        image_dir = self.settings.image_dir.expanduser()
        if self.settings.image:
            return cloud_image(self.settings.image, image_dir)
        return built_image(Recipe(), image_dir)

    def _image_volumes(self, image: Image) -> dict[str, Path]:
        """Volume name -> local file for the base disk (and kernel/initrd for direct boot)."""
        tag = image.tag
        volumes = {f"base-{tag}.qcow2": image.disk}
        if image.kernel is not None and image.initrd is not None:
            volumes[f"vmlinuz-{tag}"] = image.kernel
            volumes[f"initrd-{tag}.img"] = image.initrd
        return volumes

    def _upload_image(self, image: Image) -> None:
        pool = self.conn.storagePoolLookupByName(self.pool_name)
        pool.refresh(0)
        for name, path in self._image_volumes(image).items():
            if self._lookup(pool.storageVolLookupByName, name) is None:
                self._upload(pool, name, path)

    def _upload(self, pool: libvirt.virStoragePool, name: str, path: Path) -> None:
        size = path.stat().st_size
        log.info("uploading %s (%d MiB) into pool %s", name, size >> 20, self.pool_name)
        vol = pool.createXML(render("lab/volume.xml.j2", name=name, capacity=size, format="raw", backing_path=None))
        stream = self.conn.newStream(0)
        try:
            vol.upload(stream, 0, size, 0)
            with path.open("rb") as source:
                stream.sendAll(lambda _stream, nbytes, fh: fh.read(min(nbytes, UPLOAD_CHUNK)), source)
            stream.finish()
        except BaseException:
            stream.abort()
            vol.delete(0)
            raise

    # ---- per guest -----------------------------------------------------------------------------

    def ensure_guest(self, guest: Guest) -> None:
        """Overlay, seed and domain of `guest` exist and the domain runs."""
        self.prepare()
        assert self._image is not None
        with self._lock:
            pool = self.conn.storagePoolLookupByName(self.pool_name)
            overlay_name = f"{guest.name}.qcow2"
            seed_name = f"{guest.name}-seed.iso"
            if self._lookup(pool.storageVolLookupByName, overlay_name) is None:
                base = pool.storageVolLookupByName(f"base-{self._image.tag}.qcow2")
                xml = render(
                    "lab/volume.xml.j2",
                    name=overlay_name,
                    capacity=_virtual_size(self._image.disk),
                    format="qcow2",
                    backing_path=base.path(),
                )
                pool.createXML(xml, 0)
            if self._lookup(pool.storageVolLookupByName, seed_name) is None:
                iso = self._write_seed(guest)
                self._upload(pool, seed_name, iso)
            domain = self._lookup(self.conn.lookupByName, self.lab.domain_name(guest))
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

    def _domain_xml(self, guest: Guest, pool: libvirt.virStoragePool) -> str:
        assert self._image is not None
        tag = self._image.tag
        kernel_path = initrd_path = None
        if self._image.direct_boot:
            kernel_path = pool.storageVolLookupByName(f"vmlinuz-{tag}").path()
            initrd_path = pool.storageVolLookupByName(f"initrd-{tag}.img").path()
        return render(
            "lab/domain.xml.j2",
            domain_type=self.domain_type(),
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
        """Block (cooperatively under gevent) until the guest is ready; seconds waited.

        Ready means sshd answers and the first boot has finished. The lab's image orders sshd after
        its first-boot unit, so the banner is enough there; on a cloud image cloud-init's config stage
        runs beside sshd and may restart it (set_passwords does), refusing connections for a moment
        after the first banner, so its end is awaited over SSH.
        """
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self._ssh_banner(guest) and self._cloud_init_done(guest, deadline):
                waited = time.monotonic() - started
                say(f"{guest.name}: SSH ready after {waited:.1f} s")
                return waited
            domain = self._lookup(self.conn.lookupByName, self.lab.domain_name(guest))
            if domain is None or not domain.isActive():
                raise LabError(
                    f"{guest.name}: domain {self.lab.domain_name(guest)} stopped while booting; "
                    f"see its console log {self.console_log(guest)}"
                )
            time.sleep(2)
        raise SSHTimeout(
            f"{guest.name}: SSH at {guest.address}:{SSH_PORT} not ready after {timeout:.0f} s; "
            f"see its console log {self.console_log(guest)}"
        )

    def _cloud_init_done(self, guest: Guest, deadline: float) -> bool:
        """Wait for cloud-init over SSH where there is one; False when the connection failed (try again)."""
        if not self._image_has_cloud_init():
            return True
        try:
            done = subprocess.run(
                ["ssh", "-F", str(self.ssh_config), guest.name, "cloud-init status --wait"],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=max(deadline - time.monotonic(), 1),
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        if done.returncode == 255:  # ssh's own failure: sshd restarting, or not listening yet
            return False
        if done.returncode != 0:
            status = (done.stdout + done.stderr).decode(errors="replace").strip()
            log.warning("%s: cloud-init finished with errors (exit %d): %s", guest.name, done.returncode, status)
        return True

    def _image_has_cloud_init(self) -> bool:
        """The lab's own image has none (its first boot runs before sshd); a cloud image has it."""
        return bool(self.settings.image)

    def _ssh_banner(self, guest: Guest) -> bool:
        jump = proxy_jump(self.settings.uri)
        if jump is None:
            try:
                with socket.create_connection((str(guest.address), SSH_PORT), timeout=5) as sock:
                    sock.settimeout(5)
                    return sock.recv(4).startswith(b"SSH-")
            except OSError:
                return False
        try:
            probe = subprocess.run(
                ["ssh", "-F", str(self.ssh_config), "-W", f"{guest.address}:{SSH_PORT}", jump],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=30,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return probe.stdout.startswith(b"SSH-")

    # ---- status and destroy --------------------------------------------------------------------

    def status(self) -> list[GuestStatus]:
        states = {
            libvirt.VIR_DOMAIN_RUNNING: "running",
            libvirt.VIR_DOMAIN_PAUSED: "paused",
            libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down",
            libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
            libvirt.VIR_DOMAIN_CRASHED: "crashed",
        }
        result = []
        for guest in self.lab.guests:
            domain = self._lookup(self.conn.lookupByName, self.lab.domain_name(guest))
            if domain is None or lab_of_xml(domain.XMLDesc(0)) != self.settings.name:
                state = "absent"
            else:
                state = states.get(domain.state()[0], "unknown")
            result.append(
                GuestStatus(
                    guest.name,
                    self.lab.domain_name(guest),
                    state,
                    str(guest.address),
                    describe_shape(guest),
                    self.console_log(guest),
                )
            )
        return result

    def destroy(self) -> list[str]:
        """Remove the lab's domains, network, pool with its volumes, and the lab's local files.

        Only objects carrying the lab's metadata (domains, network) or its pool name and path are
        touched; running it again finds nothing and removes nothing.
        """
        removed: list[str] = []
        for domain in self.conn.listAllDomains(0):
            if lab_of_xml(domain.XMLDesc(0)) != self.settings.name:
                continue
            if domain.isActive():
                domain.destroy()
            domain.undefine()
            removed.append(f"domain {domain.name()}")
        net = self._lookup(self.conn.networkLookupByName, self.network_name)
        if net is not None and lab_of_xml(net.XMLDesc()) == self.settings.name:
            if net.isActive():
                net.destroy()
            net.undefine()
            removed.append(f"network {self.network_name}")
        pool = self._lookup(self.conn.storagePoolLookupByName, self.pool_name)
        if pool is not None:
            self._require_owned_pool(pool)
            if not pool.isActive():
                pool.create(0)
            pool.refresh(0)
            for vol in pool.listAllVolumes(0):
                vol.delete(0)
                removed.append(f"volume {vol.name()}")
            pool.destroy()
            pool.delete(0)
            pool.undefine()
            removed.append(f"pool {self.pool_name}")
        removed += self._remove_local_files()
        self._prepared = False
        return removed

    def _remove_local_files(self) -> list[str]:
        removed = []
        for relative in ("keys", "seeds", "console", "known_hosts", "ssh_config"):
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

    @staticmethod
    def _lookup(lookup, name: str):  # noqa: ANN001, ANN205 - any virConnect/virStoragePool lookup
        try:
            return lookup(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() in (
                libvirt.VIR_ERR_NO_DOMAIN,
                libvirt.VIR_ERR_NO_NETWORK,
                libvirt.VIR_ERR_NO_STORAGE_POOL,
                libvirt.VIR_ERR_NO_STORAGE_VOL,
            ):
                return None
            raise


_HOSTS: dict[tuple[str, str], LabHost] = {}
_HOSTS_LOCK = threading.Lock()


def lab_host(lab: Lab) -> LabHost:
    """The process-wide LabHost of a lab, so parallel guests share one preparation."""
    key = (lab.settings.uri, lab.settings.name)
    with _HOSTS_LOCK:
        if key not in _HOSTS or _HOSTS[key].lab != lab:
            _HOSTS[key] = LabHost(lab)
        return _HOSTS[key]


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


def lab_of_xml(xml: str) -> str | None:
    """The lab name in an object's <metadata>, or None for objects numa-lab did not create."""
    root = ET.fromstring(xml)
    element = root.find(f"./metadata/{{{NAMESPACE}}}lab")
    return element.get("name") if element is not None else None


def _virtual_size(disk: Path) -> int:
    out = subprocess.run(
        ["qemu-img", "info", "--output=json", str(disk)], capture_output=True, text=True, check=True
    )
    return int(json.loads(out.stdout)["virtual-size"])


def _kvm_usable() -> bool:
    """libvirt's qemu (user libvirt-qemu, group kvm) can open /dev/kvm."""
    try:
        st = os.stat("/dev/kvm")
    except FileNotFoundError:
        return False
    try:
        import grp

        kvm_gid = grp.getgrnam("kvm").gr_gid
    except KeyError:
        kvm_gid = None
    return bool(st.st_mode & 0o006) or (st.st_gid == kvm_gid and st.st_mode & 0o060 == 0o060)
