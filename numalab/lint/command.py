"""The `numalab lint FILE...` subcommand: exit 0 clean, 1 findings, 2 unreadable input."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalab.cli import UsageError
from numalab.lint.cluster_schedulers import running_schedulers
from numalab.lint.rules import DEFAULT_SCHEDULER, DEFAULT_SCOPE, RULES, Finding, LintSettings, lint_workload
from numalab.lint.workloads import POD_SPEC_PATHS, ManifestError, load_documents, source_name, workloads
from numalab.model.errors import ValidationError
from numalab.model.topology import Topology
from numalab.yamlfile import load_yaml

EXIT_CLEAN = 0
EXIT_FINDINGS = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="say why workloads asking for numa-align will not be pinned",
        description=(
            "Check " + ", ".join(POD_SPEC_PATHS) + " manifests (multi-document YAML) that request "
            "numa-align/numa-N. Rules: " + ", ".join(RULES) + ". Exit 0 clean, 1 findings, "
            "2 unreadable input."
        ),
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="manifest files; - reads stdin")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--topology", type=Path, metavar="FILE",
        help="YAML/JSON mapping worker name -> NUMA data (the Topology.from_dict form: cells, distances)",
    )
    parser.add_argument(
        "--capacity-mode", choices=("slots", "cpus"),
        default="cpus" if os.environ.get("NUMA_CAPACITY", "").strip() == "cpus" else "slots",
        help="the plugin's NUMA_CAPACITY: 'cpus' (one device per CPU) or 'slots' (a device count); "
             "default from $NUMA_CAPACITY, else slots",
    )
    parser.add_argument(
        "--topology-scope", choices=("container", "pod"), default=DEFAULT_SCOPE,
        help=f"the kubelet's topologyManagerScope (default {DEFAULT_SCOPE}: what numa-lab's deploy writes "
             "unless settings.topology-manager-scope says otherwise)",
    )
    parser.add_argument(
        "--scheduler", action="append", metavar="NAME",
        help="a schedulerName the cluster runs besides default-scheduler (repeat it; e.g. numa-aware when the "
             "NUMA-aware scheduler is on); given, a pod naming any other scheduler is reported",
    )
    parser.add_argument(
        "--kubeconfig", type=Path, metavar="PATH",
        help="learn the schedulers that run from the cluster (their Leases in kube-system, renewed within a "
             "minute): numa-lab's NUMA-aware scheduler holds numa-scheduler",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    worker_nodes = read_worker_nodes(args.topology) if args.topology else None
    schedulers = None
    if args.scheduler or args.kubeconfig:
        schedulers = frozenset({DEFAULT_SCHEDULER, *(args.scheduler or ())})
        if args.kubeconfig:
            schedulers |= running_schedulers(args.kubeconfig)
    settings = LintSettings(args.capacity_mode, args.topology_scope, worker_nodes, schedulers)
    findings = lint_files(args.files, settings)
    if args.format == "json":
        print(json.dumps([finding.as_dict() for finding in findings], indent=2))
    else:
        for finding in findings:
            print(finding.text())
    return EXIT_FINDINGS if findings else EXIT_CLEAN


def lint_files(paths: list[Path], settings: LintSettings) -> list[Finding]:
    """Findings of every workload in the files, in file order; unreadable input raises UsageError."""
    findings: list[Finding] = []
    if sum(str(path) == "-" for path in paths) > 1:
        raise UsageError("lint: - (standard input) can be given once")
    for path in paths:
        source = source_name(path)
        try:
            for workload in workloads(source, load_documents(path)):
                try:
                    findings.extend(lint_workload(workload, settings))
                except ValidationError as exc:
                    raise ManifestError(f"{source}: document {workload.document}: {workload.object}: {exc}") from None
        except (ManifestError, ValidationError) as exc:
            raise UsageError(str(exc)) from None
    return findings


def read_worker_nodes(path: Path) -> dict[str, frozenset[int]]:
    """NUMA node ids per worker from a topology file; bad content raises UsageError naming the field."""
    data = load_yaml(path, "--topology")
    if not isinstance(data, Mapping) or not data:
        raise UsageError(f"--topology {path}: expected a mapping of worker name -> NUMA data (cells: ...)")
    nodes: dict[str, frozenset[int]] = {}
    for worker, numa in data.items():
        if not isinstance(numa, Mapping):
            raise UsageError(f"--topology {path}: {worker}: expected a mapping with cells")
        try:
            nodes[str(worker)] = frozenset(Topology.from_dict(numa, where=str(worker)).ids)
        except ValidationError as exc:
            raise UsageError(f"--topology {path}: {exc}") from None
    return nodes
