"""`numalab k8s build|version`: build the Kubernetes binaries on the controller, or say which ones a spec names.

Both print `VERSION DIRECTORY` on stdout (or JSON with --json) and progress on stderr; bad input exits 2
with one line, like every other subcommand.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from numalab.cli import UsageError
from numalab.k8s.binaries import GO_PREFIX, SPEC_HELP, Binaries, resolve_binaries
from numalab.k8s.cache import default_cache_root
from numalab.k8s.errors import BinariesError
from numalab.k8s.versions import KUBERNETES_VERSION
from numalab.progress import Progress, Silent


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "k8s",
        help="build or locate the Kubernetes binaries the cluster runs",
        description="Build kubelet, kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy from the Go "
        "module proxy (cached per Kubernetes and Go version), or check binaries from a directory or a server tarball.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build (or reuse) the binaries of a release from the Go module proxy")
    build.add_argument(
        "--version",
        default=f"{GO_PREFIX}{KUBERNETES_VERSION}",
        metavar="go:vX.Y.Z",
        help=f"the release to build (default: {GO_PREFIX}{KUBERNETES_VERSION})",
    )
    version = actions.add_parser("version", help="the version and directory of already available binaries")
    version.add_argument("spec", help=SPEC_HELP + " (go: specs are not built here)")
    version.add_argument("--expect", metavar="vX.Y.Z", help="refuse binaries of any other version")
    for sub in (build, version):
        sub.add_argument(
            "--cache-dir",
            type=Path,
            metavar="DIR",
            help="where built and extracted binaries are kept (default: $NUMALAB_IMAGE_DIR/k8s, "
            "~/.local/share/numa-lab/images/k8s)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON instead of `VERSION DIRECTORY`")
        sub.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cache_root = (args.cache_dir or default_cache_root(os.environ)).expanduser()
    progress = Silent() if args.quiet else Progress(prefix=f"numalab k8s {args.action}")
    try:
        if args.action == "build":
            spec = args.version if args.version.startswith(GO_PREFIX) else GO_PREFIX + args.version
            binaries = resolve_binaries(spec, cache_root, progress=progress)
        else:
            binaries = resolve_binaries(args.spec, cache_root, args.expect, progress=progress, build=False)
    except BinariesError as exc:
        raise UsageError(str(exc)) from None
    _print(binaries, args.json)
    return 0


def _print(binaries: Binaries, as_json: bool) -> None:
    if as_json:
        fields = {
            "version": binaries.version,
            "directory": str(binaries.directory),
            "source": binaries.source,
            "sha256": binaries.sha256,
        }
        print(json.dumps(fields, indent=2))
    else:
        print(f"{binaries.version} {binaries.directory}")
