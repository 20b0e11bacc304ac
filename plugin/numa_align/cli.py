"""`numa-align`: serve (the default), discover, inspect.

Settings come from NUMA_* variables or the equal flags (a flag wins). Bad input exits 2 with one line on
stderr naming the variable, before the plugin creates any socket.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from numa_align import __version__
from numa_align.cpulist import format_cpulist
from numa_align.node_settings import node_environment
from numa_align.settings import OPTIONS, Settings, SettingsError, read_settings

if TYPE_CHECKING:
    from numa_align.kubeapi import KubeClient

log = logging.getLogger("numa_align")

SUBCOMMANDS = ("serve", "discover", "inspect")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2) like every other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "inspect":
        # Lazy: the inspector is its own module (PodResources client) and may pull in more.
        from numa_align import inspect as inspector

        return inspector.main(args[1:])
    if not args or (args[0] not in SUBCOMMANDS and args[0] not in ("-h", "--help", "--version")):
        args.insert(0, "serve")
    parsed = _parser().parse_args(args)
    return parsed.func(parsed)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="numa-align", description="Kubelet device plugin: each NUMA node N as numa-align/numa-N.")
    parser.add_argument("--version", action="version", version=f"numa-align {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    serve = sub.add_parser("serve", help="run the device plugin (the default)")
    _add_options(serve, serving=True)
    serve.set_defaults(func=_serve)
    discover = sub.add_parser("discover", help="print the NUMA topology and devices as JSON, then exit")
    _add_options(discover, serving=False)
    discover.set_defaults(func=_discover)
    sub.add_parser("inspect", help="show what the kubelet allocated (PodResources API)", add_help=False)
    return parser


def _add_options(parser: argparse.ArgumentParser, serving: bool) -> None:
    for key, option in OPTIONS.items():
        if key == "socket_dir" and not serving:
            continue
        parser.add_argument(option.flag, dest=key, metavar=option.variable, help=option.help)


def _flags(parsed: argparse.Namespace) -> dict[str, str | None]:
    return {key: getattr(parsed, key, None) for key in OPTIONS}


def _discover(parsed: argparse.Namespace) -> int:
    from numa_align.discovery import describe, discover

    try:
        settings = read_settings(node_environment(os.environ), _flags(parsed), serving=False)
        host = discover(settings)
    except SettingsError as exc:
        print(f"numa-align: {exc}", file=sys.stderr)
        return 2
    json.dump(describe(host, settings), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _serve(parsed: argparse.Namespace) -> int:
    """Serve until a signal. Bad settings return 2; once it served, the process ends here (_exit_at_once)."""
    from numa_align.discovery import discover
    from numa_align.guard_report import GuardRecord
    from numa_align.metrics import Metrics
    from numa_align.publishing import NrtPublisher
    from numa_align.running import Plugin

    try:
        settings = read_settings(node_environment(os.environ), _flags(parsed), serving=True)
        host = discover(settings)
        client = _kube_client(settings, flag_given=parsed.kubeconfig is not None)
    except SettingsError as exc:
        print(f"numa-align: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    metrics = Metrics()
    plugin = Plugin(settings, host, metrics)
    publisher = None
    if client is not None or settings.metrics_addr is not None:
        # the kubelet guard's moves at this boot: gauges and Events, from its record when it changes
        publisher = NrtPublisher(settings, lambda: plugin.topology, client, metrics,
                                 guard_record=GuardRecord(settings.guard_record))

    def on_signal(signum: int, _frame: object) -> None:
        plugin.stop(f"received {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    memory_only = ",".join(str(n.id) for n in host.memory_only_nodes) or "none"
    log.info(
        "numa-align %s: %d NUMA nodes with CPUs (%s), memory-only nodes: %s, capacity %s, reserved CPUs %s, "
        "sockets in %s", __version__, len(host.cpu_nodes), ",".join(str(n.id) for n in host.cpu_nodes), memory_only,
        settings.capacity, format_cpulist(settings.reserved_cpus) or "none", settings.socket_dir,
    )
    if client is not None:
        log.info("publishing NodeResourceTopology %s to %s (%s, topology manager %s/%s), polling %s every %gs",
                 settings.node_name, client.server, client.config.source, settings.topology_policy,
                 settings.topology_scope, settings.pod_resources_socket, settings.poll_interval)
    code = 0
    try:
        if publisher is not None:
            publisher.start()
        plugin.run()
    except OSError as exc:
        log.error("cannot serve: %s", exc)
        code = 1
    finally:
        if publisher is not None:
            publisher.stop()
    _exit_at_once(code)


def _exit_at_once(code: int) -> NoReturn:
    """End the process without the interpreter's finalization, once the sockets are removed and the threads
    told to stop. Finalizing with gRPC loaded took 0.8 s of CPU on an emulated lab guest, and many times that
    while its host was busy: a stop once overran systemd's TimeoutStopSec, which then killed the plugin."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _kube_client(settings: Settings, flag_given: bool) -> KubeClient | None:
    """The API client NRT publishing uses (None when it is off); a bad configuration is a SettingsError."""
    if not settings.nrt:
        return None
    from numa_align.kubeapi import KubeClient
    from numa_align.kubeconfig import ConfigError, load_config

    option = OPTIONS["kubeconfig"]
    try:
        return KubeClient(load_config(settings.kubeconfig))
    except ConfigError as exc:
        raise SettingsError(option.flag if flag_given else option.variable, str(exc)) from None
