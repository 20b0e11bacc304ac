"""`numalab lab status|destroy|console`: look at or remove a lab declared by an inventory file.

The lab is the one inventories/kvm.py (or --inventory PATH) declares with the current environment;
a NAME argument sets NUMALAB_NAME first, so one inventory can describe several labs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from numalab.cli import UsageError
from numalab.lab.errors import LabError
from numalab.lab.inventory import default_inventory_path, lab_of_inventory
from numalab.lab.provisioning import LabHost
from numalab.lab.remote import is_local_uri
from numalab.lab.spec import Lab
from numalab.model.cluster import choose_distribution

EXIT_LAB_ERROR = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="status, destroy or console of the KVM lab",
        description="Inspect or remove the KVM lab declared by an inventory (bring it up with pyinfra).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser("status", help="the lab's guests: state, address, NUMA shape")
    status.add_argument("name", nargs="?", help="lab name (default: $NUMALAB_NAME or numa-lab)")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    destroy = actions.add_parser("destroy", help="remove the lab's domains, network, disks, seeds and keys")
    destroy.add_argument("name", nargs="?", help="lab name (default: $NUMALAB_NAME or numa-lab)")
    console = actions.add_parser("console", help="print a guest's serial console log")
    console.add_argument("guest", help="guest name, e.g. worker-1")
    console.add_argument("--name", help="lab name (default: $NUMALAB_NAME or numa-lab)")
    console.add_argument("--lines", type=int, default=0, metavar="N", help="only the last N lines")
    for sub in (status, destroy, console):
        sub.add_argument("--inventory", type=Path, metavar="PATH", help="inventory file (default: inventories/kvm.py)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    lab = _load_lab(args.inventory, args.name)
    try:
        if args.action == "status":
            return _status(LabHost(lab), args.json)
        if args.action == "destroy":
            return _destroy(LabHost(lab))
        return _console(LabHost(lab), args.guest, args.lines)
    except LabError as exc:
        print(f"numalab lab {args.action}: {exc}", file=sys.stderr)
        return EXIT_LAB_ERROR


def _load_lab(inventory: Path | None, name: str | None) -> Lab:
    if name:
        os.environ["NUMALAB_NAME"] = name
    path = inventory or default_inventory_path()
    try:
        return lab_of_inventory(path)
    except (FileNotFoundError, LookupError) as exc:
        raise UsageError(f"--inventory: {exc}") from None


def _status(host: LabHost, as_json: bool) -> int:
    rows = host.status()
    if as_json:
        choice, why = choose_distribution(host.settings.distribution)
        print(json.dumps({"lab": host.settings.name, "distribution": {"choice": choice, "why": why},
                          "guests": [asdict(row) for row in rows]}, indent=2))
        return 0
    print(f"lab {host.settings.name} on {host.settings.uri} (network {host.settings.network} {host.settings.subnet})")
    choice, why = choose_distribution(host.settings.distribution)
    print(f"Kubernetes distribution: {choice} ({why}; NUMALAB_DISTRIBUTION={host.settings.distribution})")
    width = max(len(row.name) for row in rows)
    for row in rows:
        print(f"{row.name:<{width}}  {row.state:<9}  {row.address:<15}  {row.shape}")
    return 0


def _destroy(host: LabHost) -> int:
    removed = host.destroy()
    for item in removed:
        print(f"removed {item}")
    if not removed:
        print(f"lab {host.settings.name}: nothing to remove")
    return 0


def _console(host: LabHost, guest_name: str, lines: int) -> int:
    try:
        guest = host.lab.guest(guest_name)
    except KeyError as exc:
        raise UsageError(f"guest: {exc.args[0]}") from None
    log = Path(host.console_log(guest))
    if not is_local_uri(host.settings.uri):
        raise LabError(f"{guest.name}'s console log is on the libvirt host {host.settings.uri} at {log}")
    if not log.exists():
        raise LabError(f"{guest.name} has no console log yet at {log} (has the lab been brought up?)")
    text = log.read_text(errors="replace").splitlines()
    print("\n".join(text[-lines:] if lines > 0 else text))
    return 0
