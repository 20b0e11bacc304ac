"""`numalab image push`: build the lab images and push them to the lab registry over its HTTP API v2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from numalab.cli import UsageError
from numalab.images.lab_images import ImageBuildError, push_lab_images
from numalab.images.push import RegistryClient, RegistryError
from numalab.k8s.source import SourceError
from numalab.k8s.versions import KUBERNETES_VERSION

EXIT_PUSH_ERROR = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "image",
        help="build and push the lab's container images",
        description="Build the lab images (pause, probe, coredns, numa-align) without a container engine and push them "
        "to a registry.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    push = actions.add_parser("push", help="build the lab images and push them (idempotent)")
    push.add_argument("images", nargs="*", metavar="IMAGE",
                      help="pause, probe, coredns, numa-align or numa-lab/<name>[:tag] (default: every lab image)")
    push.add_argument("--registry", required=True, metavar="HOST:PORT", help="the registry, e.g. registry:5000")
    push.add_argument("--ca", type=Path, metavar="FILE", help="CA certificate the registry's TLS certificate "
                      "chains to (default: the system CAs)")
    push.add_argument("--resolve", metavar="HOST:ADDRESS", help="connect to ADDRESS for HOST while TLS still "
                      "verifies HOST, e.g. registry:192.168.122.10")
    push.add_argument("--kubernetes-version", default=KUBERNETES_VERSION, metavar="VERSION",
                      help=f"whose build/pause the pause image comes from (default: {KUBERNETES_VERSION})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        RegistryClient(args.registry, args.ca, args.resolve)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    try:
        pushed = push_lab_images(args.registry, args.ca, args.resolve, args.kubernetes_version, args.images)
    except LookupError as exc:
        raise UsageError(str(exc)) from None
    except (RegistryError, ImageBuildError, SourceError) as exc:
        print(f"numalab image push: {exc}", file=sys.stderr)
        return EXIT_PUSH_ERROR
    for image in pushed:
        print(image.summary())
    return 0
