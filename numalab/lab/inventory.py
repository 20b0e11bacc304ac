"""Turning a validated Lab into pyinfra inventory groups, and reading a lab back from an inventory file.

Every guest's host data carries the whole lab (`kvm_lab`), so the connector of any one guest can
create the shared network with every guest's DHCP entry, and `numalab lab` can find the lab again
from the same inventory file.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalab.lab.remote import is_local_uri
from numalab.lab.spec import Guest, Lab, lab_from_dict
from numalab.model.errors import ValidationError
from numalab.yamlfile import load_yaml

CONNECTOR = "kvm"
DEFAULT_INVENTORY = Path(__file__).resolve().parents[2] / "inventories" / "kvm.py"


def extra_guests(environ: Mapping[str, str]) -> list[Any]:
    """The guests NUMALAB_EXTRA_GUESTS (a YAML file holding a list of guests) adds to an inventory's own."""
    path = environ.get("NUMALAB_EXTRA_GUESTS")
    if not path:
        return []
    guests = load_yaml(Path(path), "NUMALAB_EXTRA_GUESTS")
    if not isinstance(guests, list):
        raise ValidationError("NUMALAB_EXTRA_GUESTS", f"{path} holds no list of guests")
    return guests


def host_name(guest: Guest) -> str:
    return f"@{CONNECTOR}/{guest.name}"


def host_data(lab: Lab, guest: Guest) -> dict[str, Any]:
    """pyinfra host data: connector data, SSH settings for the lab, and what deploys read."""
    state_dir = lab.settings.state_dir.expanduser()
    data: dict[str, Any] = {
        "kvm_lab": lab.to_dict(),
        "kvm_guest": guest.name,
        "numa": guest.topology.to_dict(),
        "lab_name": lab.settings.name,
        "lab_address": str(guest.address),
        "lab_hosts": {g.name: str(g.address) for g in lab.guests},
        "k8s_distribution": lab.settings.distribution,
        "ssh_hostname": str(guest.address),
        "ssh_user": "root",
        "ssh_key": str(state_dir / "keys" / "id_ed25519"),
        "ssh_known_hosts_file": str(state_dir / "known_hosts"),
        "ssh_strict_host_key_checking": "yes",
        "ssh_allow_agent": False,
        "ssh_look_for_keys": False,
        "ssh_connect_retries": 3,
        "ssh_connect_retry_min_delay": 2.0,
        "ssh_connect_retry_max_delay": 5.0,
    }
    if not is_local_uri(lab.settings.uri):
        data["ssh_config_file"] = str(state_dir / "ssh_config")  # ProxyJump via the libvirt host
    return data


def pyinfra_groups(lab: Lab) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Group name -> [(host name, data)]; guests without groups land in `lab_guests` only."""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {"lab_guests": []}
    for guest in lab.guests:
        entry = (host_name(guest), host_data(lab, guest))
        groups["lab_guests"].append(entry)
        for group in guest.groups:
            groups.setdefault(group, []).append(entry)
    return groups


def lab_of_inventory(path: Path) -> Lab:
    """The lab declared by an inventory file (executed like pyinfra does, with the current env)."""
    if not path.is_file():
        raise FileNotFoundError(f"no inventory file {path}")
    namespace = runpy.run_path(str(path))
    for value in namespace.values():
        hosts = value[0] if isinstance(value, tuple) and value and isinstance(value[0], list) else value
        if not isinstance(hosts, list):
            continue
        for host in hosts:
            if isinstance(host, tuple) and len(host) == 2 and isinstance(host[1], dict) and "kvm_lab" in host[1]:
                return lab_from_dict(host[1]["kvm_lab"])
    raise LookupError(f"{path} declares no lab guests (hosts with kvm_lab data from numalab.lab.inventory)")


def default_inventory_path() -> Path:
    return Path(os.environ.get("NUMALAB_INVENTORY") or DEFAULT_INVENTORY)


def default_inventory_host_data(name: str) -> dict[str, Any]:
    """Data for `@kvm/<name>` used without an inventory: the guest of the default inventory.

    When the default inventory has no such guest the data is just the guest name; an inventory
    that lists the host supplies the rest (its host data overrides this).
    """
    path = default_inventory_path()
    if not path.is_file():
        return {"kvm_guest": name}
    lab = lab_of_inventory(path)
    if name not in lab.names:
        return {"kvm_guest": name}
    return host_data(lab, lab.guest(name))
