"""`numalab kubelet-args`: the checked kubelet-arg set for a topology file or a sysfs tree."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topology", type=Path, metavar="FILE.yaml", help="topology in numa-lab's form")
    source.add_argument("--sysfs-root", type=Path, metavar="DIR", help="read DIR/sys/devices/system/node")
    parser.add_argument("--settings", type=Path, metavar="FILE.yaml", help="kubelet settings (defaults if omitted)")
    parser.add_argument("--format", choices=("args", "rke2", "json"), default="args")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.topology is not None:
        topology = Topology.from_dict(load_yaml(args.topology, "--topology"), where=str(args.topology))
    else:
        if not (args.sysfs_root / "sys/devices/system/node").is_dir():
            raise ValidationError("--sysfs-root", f"{args.sysfs_root}/sys/devices/system/node is not a directory")
        topology = topology_from_sysfs(args.sysfs_root)
    settings_data = load_yaml(args.settings, "--settings") if args.settings else None
    settings = KubeletSettings.from_dict(settings_data, where=str(args.settings or "settings"))
    policy = kubelet_policy(topology, settings)
    if args.format == "args":
        print("\n".join(policy.flags))
    elif args.format == "rke2":
        print(yaml.safe_dump({"kubelet-arg": list(policy.args)}, sort_keys=False, width=1000), end="")
    else:
        print(json.dumps({"topology": topology.to_dict(), **policy.to_dict()}, indent=2, default=str))
    return 0

