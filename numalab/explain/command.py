"""`numalab explain POD.yaml|-` and `kubectl numa explain`: the verdict each node's kubelet would give the pod.

Exit 0 with the verdicts (rejections and no-data nodes are answers), 2 with one line on stderr when the
manifest cannot be read as one pod or the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

from numalab.explain.requests import SpecError, pod_from_documents
from numalab.explain.source import ExplainSource, open_source
from numalab.explain.verdicts import as_json, explain, format_text
from numalab.lint.workloads import ManifestError, load_documents, source_name
from numalab.model.errors import ValidationError
from numalab.top.command import add_cluster_arguments, kubeconfig_of
from numalab.top.source import TopError, read_cluster

EXIT_OK, EXIT_ERROR = 0, 2
DESCRIPTION = (
    "For each node (or --node), the admission verdict its kubelet would give the pod now: admitted on which "
    "NUMA cells, or rejected with the kubelet's reason and the hints behind it; which scheduler binds it and "
    "whether the NUMA-aware one's filter passes the node. API data only: NodeResourceTopology objects, Nodes, "
    "Pods, numa-align's Leases and each kubelet's /configz. A Deployment, StatefulSet, DaemonSet, Job or "
    "CronJob is read through its pod template."
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("explain", help="predict each node's kubelet admission verdict for a pod",
                                   description=DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run, prog="numalab explain")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, metavar="POD.yaml|-",
                        help="the pod (or workload) manifest; - reads stdin")
    add_cluster_arguments(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="stdout format (default text)")


def collect(args: argparse.Namespace, source: ExplainSource) -> tuple[Any, list[Any]]:
    nrts, nodes, pods = read_cluster(source, args.node)
    names = {str((n.get("metadata") or {}).get("name")) for n in nodes}
    if args.node and args.node not in names:
        raise TopError(f"--node {args.node}: no such Node")
    configs = {name: source.kubelet_config(name) for name in sorted(names) if not args.node or name == args.node}
    return configs, [nrts, nodes, pods, source.leases()]


def kubectl_main(argv: list[str]) -> int:
    """`kubectl numa explain ...`: the same command under kubectl's plugin name."""
    parser = argparse.ArgumentParser(prog="kubectl numa explain", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.prog = "kubectl numa explain"
    return run(args)


def run(args: argparse.Namespace) -> int:
    prog = getattr(args, "prog", "numalab explain")
    try:
        pod = pod_from_documents(source_name(args.manifest), load_documents(args.manifest))
        configs, (nrts, nodes, pods, leases) = collect(args, open_source(kubeconfig_of(args), args.context))
    except (ManifestError, SpecError, ValidationError, TopError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    verdicts = explain(pod, nrts, nodes, pods, leases, datetime.datetime.now(datetime.UTC), configs, args.node)
    print(json.dumps(as_json(pod, verdicts), indent=2) if args.format == "json" else format_text(pod, verdicts))
    return EXIT_OK
