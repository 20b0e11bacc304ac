"""The lab's settings as validated data: name, state, network, libvirt URI, images, CPU weight. Pure Python, no I/O.

Read from the NUMALAB_* environment (`settings_from_env`) or an inventory's `settings` mapping
(`settings_from_dict`); each error names the field. The guests and their addresses are numalab.lab.spec's.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalab.model.cluster import DISTRIBUTIONS
from numalab.model.errors import ValidationError

NETWORK_MODES = ("isolated", "nat")
DOMAIN_TYPES = ("auto", "kvm", "qemu")
DEFAULT_NAME = "numa-lab"
DEFAULT_SUBNET = "10.77.0.0/24"
DEFAULT_URI = "qemu:///system"
DEFAULT_NETWORK = "isolated"
DEFAULT_IMAGE_DIR = "~/.local/share/numa-lab/images"
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
"""A lab's or a guest's name: a hostname label of at most 32 characters."""


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
    if not NAME.match(name):
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
