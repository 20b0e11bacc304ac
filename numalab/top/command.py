"""`numalab top` and `kubectl numa` (the same command as a kubectl plugin): NUMA cells and who holds them.

Exit 0 with the view (warnings about stale or missing NodeResourceTopology objects are part of it),
2 with one line on stderr when the cluster cannot be read or a file cannot be written.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numalab.model.errors import ValidationError
from numalab.top.model import NodeView, build_views
from numalab.top.page import render_html
from numalab.top.source import ApiSource, Source, TopError, connect, default_kubeconfig, read_cluster
from numalab.top.svg import render_svg
from numalab.top.text import as_json, format_table

EXIT_OK, EXIT_ERROR = 0, 2
DESCRIPTION = (
    "Per node and NUMA cell: CPUs and memory (total / allocatable / exclusively used), hugepages, numa-align "
    "devices and the pods holding them, from the NodeResourceTopology objects numa-align publishes, the Nodes "
    "and the Pods (API only). Stale or missing objects are warnings; an unreadable cluster exits 2."
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("top", help="each node's NUMA cells, CPUs, memory and the pods holding them",
                                   description=DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run, prog="numalab top")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Which cluster and node: the flags of every command that reads the cluster (top, explain)."""
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="kubeconfig (default $KUBECONFIG, else the lab's, in its state dir)")
    parser.add_argument("--context", help="kubeconfig context (default: its current-context)")
    parser.add_argument("--node", metavar="NAME", help="only this node")


def kubeconfig_of(args: argparse.Namespace) -> str:
    """--kubeconfig, else $KUBECONFIG, else the lab's; TopError when none can be found."""
    try:
        return args.kubeconfig or default_kubeconfig()
    except ValidationError as exc:  # a bad NUMALAB_* variable while looking for the lab's kubeconfig
        raise TopError(f"cannot find the lab's kubeconfig: {exc}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared by `numalab top` and `kubectl numa`."""
    add_cluster_arguments(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table", help="stdout format (default table)")
    parser.add_argument("--svg", type=Path, metavar="FILE", help="also write the picture as SVG")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write a page with the picture and a table")


def open_source(kubeconfig: str, context: str | None) -> Source:
    """The API reader for the kubeconfig; tests replace this to serve fake objects."""
    return ApiSource.from_client(connect(kubeconfig, context), kubeconfig)


def collect(args: argparse.Namespace) -> list[NodeView]:
    source = open_source(kubeconfig_of(args), args.context)
    nrts, nodes, pods = read_cluster(source, args.node)
    now = datetime.datetime.now(datetime.UTC)
    views = build_views(nrts, nodes, pods, only=args.node, leases=source.leases(), now=now)
    if args.node and not views:
        raise TopError(f"--node {args.node}: no such Node and no NodeResourceTopology for it")
    return views


def run(args: argparse.Namespace) -> int:
    prog = getattr(args, "prog", "numalab top")
    try:
        views = collect(args)
        for path, render in ((args.svg, render_svg), (args.html, render_html)):
            if path is not None:
                try:
                    path.write_text(render(views), encoding="utf-8")
                except OSError as exc:
                    raise TopError(f"cannot write {path}: {exc.strerror or exc}") from None
    except TopError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        print(json.dumps(as_json(views), indent=2))
    else:
        print(format_table(views))
    return EXIT_OK


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """The `kubectl-numa` console script: kubectl runs it for `kubectl numa ...` with the remaining args;
    `kubectl numa explain ...` is numalab explain."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["explain"]:
        from numalab.explain.command import kubectl_main as explain_main
        return explain_main(argv[1:])
    parser = argparse.ArgumentParser(prog="kubectl numa", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.prog = "kubectl numa"
    return run(args)


if __name__ == "__main__":
    sys.exit(kubectl_main())
