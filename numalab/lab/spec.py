"""The lab as validated data: its guests and their addresses (the settings: numalab.lab.settings). Pure
Python, no I/O.

Everything the inventory declares is checked here before any libvirt object is created, and each
error names the guest and the field (e.g. `worker-1.numa.cells[1].cpus`). The connector, the domain
XML and `numalab lab` all work from a `Lab` built by `lab_from_dict`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numalab.lab.guest_shape import boot_shape, cpu_topology, domain_cells, guest_topology, guest_vcpus
from numalab.lab.settings import NAME, Settings, settings_from_dict
from numalab.model.errors import ValidationError
from numalab.model.topology import Topology

FIRST_GUEST_HOST = 10  # guests get .10, .11, ... unless they declare an address


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
        if not isinstance(name, str) or not NAME.match(name):
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
