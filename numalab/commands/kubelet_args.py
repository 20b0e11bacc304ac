"""`numalab kubelet-args`: the checked kubelet-arg set for a topology file or a sysfs mount."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml
from numa_align.sysfs import node_dir

from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletSettings, kubelet_policy
from numalab.model.topology import Topology
from numalab.sysfs import topology_from_sysfs
from numalab.yamlfile import load_yaml


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "kubelet-args",
        help="print the kubelet args for a node's NUMA topology",
        description="Compute and check the CPU/Memory/Topology Manager kubelet args for one node.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--topology", type=Path, metavar="FILE.yaml", help="topology in numa-lab's form")
    source.add_argument(
        "--sysfs-root", type=Path, default=Path("/sys"), metavar="DIR",
        help="where sysfs is mounted, as numa-align's NUMA_SYSFS_ROOT: read DIR/devices/system/node (default /sys)",
    )
    parser.add_argument("--settings", type=Path, metavar="FILE.yaml", help="kubelet settings (defaults if omitted)")
    parser.add_argument("--allow-newer", action="store_true",
                        help="apply the newest known kubelet's rules to a kubelet newer than numa-lab knows")
    parser.add_argument("--format", choices=("args", "rke2", "json"), default="args")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.topology is not None:
        topology = Topology.from_dict(load_yaml(args.topology, "--topology"), where=str(args.topology))
    else:
        _check_sysfs_mount(args.sysfs_root)
        topology = topology_from_sysfs(args.sysfs_root)
    settings_data = load_yaml(args.settings, "--settings") if args.settings else None
    settings = KubeletSettings.from_dict(settings_data, where=str(args.settings or "settings"))
    policy = kubelet_policy(topology, settings, allow_newer=args.allow_newer)
    if args.format == "args":
        print("\n".join(policy.flags))
    elif args.format == "rke2":
        print(yaml.safe_dump({"kubelet-arg": list(policy.args)}, sort_keys=False, width=1000), end="")
    else:
        print(json.dumps({"topology": topology.to_dict(), **policy.to_dict()}, indent=2, default=str))
    return 0



def _check_sysfs_mount(sysfs: Path) -> None:
    """A missing node directory is named, with a hint when DIR is a file system root holding sys/."""
    nodes = node_dir(sysfs)
    if nodes.is_dir():
        return
    hint = f"; did you mean --sysfs-root {sysfs / 'sys'}?" if node_dir(sysfs / "sys").is_dir() else ""
    raise ValidationError("--sysfs-root", f"{nodes} is not a directory (expected where sysfs is mounted){hint}")
