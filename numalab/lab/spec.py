"""The lab as validated data: settings, guests, addresses. Pure Python, no I/O.

Everything the inventory declares is checked here before any libvirt object is created, and each
error names the guest and the field (e.g. `worker-1.numa.cells[1].cpus`). The connector, the domain
XML and `numalab lab` all work from a `Lab` built by `lab_from_dict`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalab.lab.guest_shape import boot_shape, cpu_topology, domain_cells, guest_topology, guest_vcpus
from numalab.model.cluster import DISTRIBUTIONS
from numalab.model.errors import ValidationError
from numalab.model.topology import Topology

NETWORK_MODES = ("isolated", "nat")
DOMAIN_TYPES = ("auto", "kvm", "qemu")
DEFAULT_NAME = "numa-lab"
DEFAULT_SUBNET = "10.77.0.0/24"
DEFAULT_URI = "qemu:///system"
DEFAULT_NETWORK = "isolated"
DEFAULT_IMAGE_DIR = "~/.local/share/numa-lab/images"
FIRST_GUEST_HOST = 10  # guests get .10, .11, ... unless they declare an address
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")


@dataclass(frozen=True)
class Settings:
    """Lab-wide knobs; the env variables that set them are listed in `settings_from_env`."""

    name: str = DEFAULT_NAME
    state_dir: Path = Path("~/.local/share/numa-lab") / DEFAULT_NAME
    network: str = DEFAULT_NETWORK
    subnet: ipaddress.IPv4Network = ipaddress.IPv4Network(DEFAULT_SUBNET)
    domain_type: str = "auto"
    uri: str = DEFAULT_URI
    image: str | None = None  # a cloud image path or URL instead of the debootstrap image
    image_dir: Path = Path(DEFAULT_IMAGE_DIR)  # shared by all labs: images are keyed by recipe hash
    distribution: str = "auto"  # k8s_distribution of every guest: auto, rke2 or upstream
    cpu_shares: int | None = None
    """Each guest's CPU weight against the host's other guests (libvirt <cputune><shares>); None: libvirt's
    default (1024). A lab beside guests that matter more gets less."""

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        """The host's address on the lab bridge (first host of the subnet)."""
        return self.subnet.network_address + 1

    @property
    def bridge(self) -> str:
        """A bridge name of at most 15 characters, stable per lab name."""
        return "nlab" + hashlib.sha256(self.name.encode()).hexdigest()[:8]

    @property
    def object_name(self) -> str:
        """Prefix of every libvirt object of this lab (network, pool, domains)."""
        return f"numalab-{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state_dir": str(self.state_dir),
            "network": self.network,
            "subnet": str(self.subnet),
            "domain_type": self.domain_type,
            "uri": self.uri,
            "image": self.image,
            "image_dir": str(self.image_dir),
            "distribution": self.distribution,
            "cpu_shares": self.cpu_shares,
        }


@dataclass(frozen=True)
class Guest:
    """One lab VM: its NUMA shape decides vCPUs and memory (vCPUs = all cell cpus)."""

    name: str
    topology: Topology
    address: ipaddress.IPv4Address
    mac: str
    groups: tuple[str, ...] = ()

    @property
    def vcpus(self) -> int:
        return len(guest_vcpus(self.topology))

    @property
    def memory(self) -> int:
        return self.topology.memory

    @property
    def cpu_topology(self) -> tuple[int, int, int]:
        """(sockets, cores, threads) for the domain's <topology>."""
        return cpu_topology(self.topology)

    @property
    def domain_cells(self) -> list[dict[str, Any]]:
        """The domain's <cell>s: id, vCPUs (offline ones too; '' for a memory-only cell), memory in KiB."""
        return domain_cells(self.topology)

    @property
    def boot_shape(self) -> str:
        """The first-boot unit's shape file: vCPUs to take offline, hugepages per node."""
        return boot_shape(self.topology)


@dataclass(frozen=True)
class Lab:
    settings: Settings
    guests: tuple[Guest, ...]

    def guest(self, name: str) -> Guest:
        for guest in self.guests:
            if guest.name == name:
                return guest
        raise KeyError(f"lab {self.settings.name} has no guest {name!r} (guests: {', '.join(self.names)})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(guest.name for guest in self.guests)

    def domain_name(self, guest: Guest) -> str:
        return f"{self.settings.object_name}-{guest.name}"

    def to_dict(self) -> dict[str, Any]:
        """The form `lab_from_dict` reads back (carried in each pyinfra host's data)."""
        return {
            "settings": self.settings.to_dict(),
            "guests": [
                {
                    "name": g.name,
                    "numa": g.topology.to_dict(),
                    "address": str(g.address),
                    "groups": list(g.groups),
                }
                for g in self.guests
            ],
        }


def settings_from_env(environ: Mapping[str, str], home: Path | None = None) -> Settings:
    """Settings from NUMALAB_NAME, NUMALAB_STATE_DIR, NUMALAB_NETWORK (isolated|nat), NUMALAB_SUBNET,
    NUMALAB_DOMAIN_TYPE (auto|kvm|qemu), NUMALAB_URI, NUMALAB_IMAGE, NUMALAB_IMAGE_DIR,
    NUMALAB_DISTRIBUTION (auto|rke2|upstream) and NUMALAB_CPU_SHARES; unset ones take the defaults."""
    name = environ.get("NUMALAB_NAME") or DEFAULT_NAME
    base = (home or Path("~")) / ".local/share/numa-lab"
    return settings_from_dict(
        {
            "name": name,
            "state_dir": environ.get("NUMALAB_STATE_DIR") or str(base / name),
            "network": environ.get("NUMALAB_NETWORK") or DEFAULT_NETWORK,
            "subnet": environ.get("NUMALAB_SUBNET") or DEFAULT_SUBNET,
            "domain_type": environ.get("NUMALAB_DOMAIN_TYPE") or "auto",
            "uri": environ.get("NUMALAB_URI") or DEFAULT_URI,
            "image": environ.get("NUMALAB_IMAGE") or None,
            "image_dir": environ.get("NUMALAB_IMAGE_DIR") or str(base / "images"),
            "distribution": environ.get("NUMALAB_DISTRIBUTION") or "auto",
            "cpu_shares": environ.get("NUMALAB_CPU_SHARES") or None,
        },
        where="NUMALAB",
    )


def settings_from_dict(data: Mapping[str, Any], where: str = "settings") -> Settings:
    known = {"name", "state_dir", "network", "subnet", "domain_type", "uri", "image", "image_dir", "distribution",
             "cpu_shares"}
    unknown = set(data) - known
    if unknown:
        raise ValidationError(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    name = str(data.get("name", DEFAULT_NAME))
    if not _NAME.match(name):
        raise ValidationError(
            f"{where}.name", f"lab name must be lowercase letters, digits, '-' (≤32), got {name!r}"
        )
    network = data.get("network", DEFAULT_NETWORK)
    if network not in NETWORK_MODES:
        raise ValidationError(
            f"{where}.network", f"expected one of {', '.join(NETWORK_MODES)}, got {network!r}"
        )
    domain_type = data.get("domain_type", "auto")
    if domain_type not in DOMAIN_TYPES:
        raise ValidationError(
            f"{where}.domain_type", f"expected one of {', '.join(DOMAIN_TYPES)}, got {domain_type!r}"
        )
    try:
        subnet = ipaddress.IPv4Network(str(data.get("subnet", DEFAULT_SUBNET)))
    except ValueError as exc:
        raise ValidationError(
            f"{where}.subnet", f"expected an IPv4 network like 10.77.0.0/24: {exc}"
        ) from None
    if subnet.prefixlen > 28:
        raise ValidationError(f"{where}.subnet", f"{subnet} is too small for a lab (use /28 or larger)")
    uri = str(data.get("uri", DEFAULT_URI))
    if not re.match(r"^(qemu|qemu\+[a-z]+)://", uri):
        raise ValidationError(f"{where}.uri", f"expected a qemu:// or qemu+ssh:// libvirt URI, got {uri!r}")
    state_dir = Path(str(data.get("state_dir", Path("~/.local/share/numa-lab") / name)))
    image = data.get("image")
    image_dir = Path(str(data.get("image_dir", DEFAULT_IMAGE_DIR)))
    distribution = data.get("distribution", "auto")
    if distribution not in DISTRIBUTIONS:
        raise ValidationError(
            f"{where}.distribution", f"expected one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}"
        )
    return Settings(
        name, state_dir, network, subnet, domain_type, uri, str(image) if image else None, image_dir, distribution,
        _cpu_shares(data.get("cpu_shares"), f"{where}.cpu_shares"),
    )


CPU_SHARES = (2, 262144)
"""The weights libvirt takes for <shares> (cgroup v1 cpu.shares' range; v2's cpu.weight is scaled from it)."""


def _cpu_shares(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    try:
        shares = int(str(raw))
    except ValueError:
        shares = None
    if shares is None or not CPU_SHARES[0] <= shares <= CPU_SHARES[1]:
        raise ValidationError(where, f"expected a CPU weight from {CPU_SHARES[0]} to {CPU_SHARES[1]} (libvirt's "
                                     f"default is 1024), got {raw!r}")
    return shares


def lab_from_dict(data: Mapping[str, Any]) -> Lab:
    """Build and validate a lab from {"settings": {...}, "guests": [{name, numa | vcpus+memory, ...}]}."""
    settings = settings_from_dict(data.get("settings") or {})
    raw_guests = data.get("guests")
    if not isinstance(raw_guests, Sequence) or isinstance(raw_guests, str) or not raw_guests:
        raise ValidationError("guests", "expected a non-empty list of guests")
    parsed: list[tuple[str, Topology, ipaddress.IPv4Address | None, tuple[str, ...]]] = []
    declared: dict[ipaddress.IPv4Address, str] = {}
    reserved = {settings.subnet.network_address, settings.gateway, settings.subnet.broadcast_address}
    for index, raw in enumerate(raw_guests):
        guest_where = f"guests[{index}]"
        if not isinstance(raw, Mapping) or "name" not in raw:
            raise ValidationError(guest_where, f"expected a mapping with a name, got {raw!r}")
        name = raw["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValidationError(
                f"{guest_where}.name", f"expected a hostname label like worker-1, got {name!r}"
            )
        if name in (entry[0] for entry in parsed):
            raise ValidationError(f"{name}.name", "duplicate guest name")
        unknown = set(raw) - {"name", "numa", "vcpus", "memory", "address", "groups"}
        if unknown:
            raise ValidationError(name, f"unknown key(s) {', '.join(sorted(unknown))}")
        topology = guest_topology(name, raw)
        if settings.image and (topology.offline_cpus or any(n for c in topology.cells for n in c.hugepages.values())):
            raise ValidationError(f"{name}.numa", "offline_cpus and hugepages need the lab's own image (its "
                                  "first-boot unit applies them; NUMALAB_IMAGE names a cloud image)")
        address = None
        if raw.get("address") is not None:
            address = _address(name, raw["address"], settings.subnet, reserved)
            if address in declared:
                raise ValidationError(f"{name}.address", f"{address} is also the address of {declared[address]}")
            declared[address] = name
        groups = raw.get("groups") or ()
        if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
            raise ValidationError(f"{name}.groups", f"expected a list of group names, got {groups!r}")
        parsed.append((name, topology, address, tuple(groups)))
    # Guests without an address get the next free one from .10 up, never a declared one.
    taken = set(declared) | reserved
    guests: list[Guest] = []
    for name, topology, address, groups in parsed:
        if address is None:
            address = _free_address(name, settings.subnet, FIRST_GUEST_HOST, taken)
            taken.add(address)
        guests.append(Guest(name, topology, address, stable_mac(settings.name, name), groups))
    return Lab(settings, tuple(guests))


def stable_mac(lab_name: str, guest_name: str) -> str:
    """A locally administered MAC in QEMU's 52:54:00 range, the same on every run."""
    digest = hashlib.sha256(f"{lab_name}/{guest_name}".encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def check_subnet_free(
    subnet: ipaddress.IPv4Network, routes: Iterable[tuple[str, str]], own_bridge: str, where: str = "subnet"
) -> None:
    """Refuse a subnet overlapping any route (destination, device) not on the lab's own bridge.

    `routes` holds the host's routes and the subnets of other libvirt networks; the default route
    ("default"/0.0.0.0/0) overlaps everything and is ignored.
    """
    for destination, device in routes:
        if destination in ("default", "0.0.0.0/0") or device == own_bridge:
            continue
        try:
            other = ipaddress.IPv4Network(destination, strict=False)
        except ValueError:
            continue
        if other.overlaps(subnet):
            raise ValidationError(
                where, f"{subnet} collides with {other} on {device}; choose another NUMALAB_SUBNET"
            )


def _address(
    name: str, value: Any, subnet: ipaddress.IPv4Network, reserved: set[ipaddress.IPv4Address]
) -> ipaddress.IPv4Address:
    try:
        address = ipaddress.IPv4Address(str(value))
    except ValueError:
        raise ValidationError(f"{name}.address", f"expected an IPv4 address, got {value!r}") from None
    if address not in subnet or address in reserved:
        raise ValidationError(
            f"{name}.address", f"{address} is not a free guest address of {subnet} (gateway is .1)"
        )
    return address


def _free_address(
    name: str, subnet: ipaddress.IPv4Network, start: int, taken: set[ipaddress.IPv4Address]
) -> ipaddress.IPv4Address:
    for offset in range(start, subnet.num_addresses - 1):
        candidate = subnet.network_address + offset
        if candidate not in taken:
            return candidate
    raise ValidationError(f"{name}.address", f"no free address left in {subnet}")
