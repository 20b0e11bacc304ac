"""`numalab preflight`: read only, per host: cgroup, swap, SMT, offline CPUs, memory-only nodes, hugepages
per node, the kubelet version and the policy numa-lab would write, or why the host would be refused.

With an inventory it runs `pyinfra --dry INVENTORY deploys/preflight.py` (facts only: nothing is changed)
and prints what the deploy's own preflight stage computed for each host; with `--sysfs-root` it judges
this machine (or a captured tree). Exit 0 when every host passes, 1 when any would be refused, 2 on bad
input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numalab
from numalab.k8s.versions import KUBERNETES_VERSION
from numalab.model.errors import ValidationError
from numalab.model.preflight import HostFacts, HostReport, format_reports, preflight
from numalab.sysfs import topology_from_sysfs
from numalab.yamlfile import load_yaml

DEPLOY = Path(numalab.__file__).resolve().parents[1] / "deploys" / "preflight.py"
EXIT_REFUSED = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "preflight", help="judge hosts before a deploy (read only)",
        description="Per host: the shape, the kubelet version and the policy that would be written, or why not.",
    )
    parser.add_argument("inventory", nargs="?", help="a pyinfra inventory (omit to judge --sysfs-root)")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"), metavar="DIR",
                        help="without an inventory: where sysfs is mounted (default /sys)")
    parser.add_argument("--settings", type=Path, metavar="FILE.yaml", help="without an inventory: kubelet settings")
    parser.add_argument("--kubelet-version", default=KUBERNETES_VERSION,
                        help=f"without an inventory: the kubelet to judge for (default {KUBERNETES_VERSION})")
    parser.add_argument("--allow-newer", action="store_true",
                        help="apply the newest known kubelet rules to a newer one (host data: kubelet_allow_newer)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    reports = _from_inventory(args) if args.inventory else [_local(args)]
    if args.format == "json":
        print(json.dumps([report.to_dict() for report in reports], indent=2))
    else:
        print(format_reports(reports))
    return 0 if all(report.ok for report in reports) else EXIT_REFUSED


def local_facts(sysfs: Path, settings: dict, kubelet_version: str, allow_newer: bool) -> HostFacts:
    """This machine, or a captured tree: cgroup and swap from beside the sysfs mount (`fs/cgroup`, ../proc)."""
    topology, error = None, None
    try:
        topology = topology_from_sysfs(sysfs)
    except ValidationError as exc:
        error = str(exc)
    cgroup = sysfs / "fs/cgroup"
    version = 2 if (cgroup / "cgroup.controllers").is_file() else 1 if cgroup.is_dir() else None
    swaps = sysfs.parent / "proc/swaps"
    swap = swaps.is_file() and len(swaps.read_text().splitlines()) > 1
    return HostFacts(name=os.uname().nodename if sysfs == Path("/sys") else str(sysfs), topology=topology,
                     kubelet_version=kubelet_version, settings=settings, cgroup_version=version,
                     swap_active=swap, allow_newer=allow_newer, topology_error=error)


def _local(args: argparse.Namespace) -> HostReport:
    settings = load_yaml(args.settings, "--settings") if args.settings else {}
    if not isinstance(settings, dict):
        raise ValidationError("--settings", f"{args.settings} holds no mapping of kubelet settings")
    return preflight(local_facts(args.sysfs_root, settings, args.kubelet_version, args.allow_newer))


def _from_inventory(args: argparse.Namespace) -> list[HostReport]:
    if not Path(args.inventory).is_file():
        raise ValidationError("inventory", f"{args.inventory} is not a file")
    with tempfile.TemporaryDirectory(prefix="numalab-preflight-") as out:
        env = {**os.environ, "NUMALAB_PREFLIGHT_OUT": out, "NUMALAB_ALLOW_NEWER": "1" if args.allow_newer else "0"}
        command = [sys.executable, "-m", "pyinfra", "-y", "--dry", args.inventory, str(DEPLOY)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        found = sorted(Path(out).glob("*.json"))
        if done.returncode != 0 or not found:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise ValidationError("inventory", f"pyinfra could not gather the hosts' facts "
                                  f"(exit {done.returncode}; hosts that run pods: {len(found)}):\n{tail}")
        return [_report(json.loads(path.read_text())) for path in found]


def _report(data: dict) -> HostReport:
    shape = {key: data[key] for key in ("numa_nodes", "threads_per_core", "offline_cpus", "memory_only_nodes",
                                        "hugepages", "memory") if key in data}
    args = data.get("kubelet_args")
    return HostReport(data["host"], data.get("cgroup_version"), data.get("swap_active", False),
                      data["kubelet_version"], shape, tuple(args) if args is not None else None, data.get("refused"))
