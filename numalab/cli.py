"""The `numalab` console script: the actions that are not pyinfra deploys.

Each subcommand lives in its own module with `register(subparsers)`; this file only wires them.
Bad input exits 2 with one line on stderr and nothing on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from numalab.model.errors import ValidationError

SUBCOMMAND_MODULES = [
    "numalab.commands.kubelet_args",
    "numalab.commands.preflight",
    "numalab.lint.command",
    "numalab.inspect",
    "numalab.lab.commands",
    "numalab.k8s.command",
    "numalab.images.command",
    "numalab.top.command",
    "numalab.explain.command",
]

EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input found by a subcommand; printed as one line, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="numalab", description="NUMA-aware Kubernetes as code.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValidationError, UsageError) as exc:
        print(f"numalab {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
