"""`numalab inspect HOST...`: run `numa-align inspect` on nodes over SSH and show where pods sit.

The node does the work (it alone can reach the kubelet's pod-resources socket); the controller only
connects with the lab's ssh_config (paramiko reads HostName, User, Port, IdentityFile,
UserKnownHostsFile, StrictHostKeyChecking and a one-hop ProxyJump from it) and prints the JSON or the
node-side table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import paramiko
from numa_align.inspect import format_table

from numalab.cli import UsageError

DEFAULT_REMOTE_COMMAND = "numa-align inspect"
SSH_TIMEOUT = 15.0
"""Seconds for TCP connect and SSH banner/auth; the remote command itself gets COMMAND_TIMEOUT."""
COMMAND_TIMEOUT = 60.0

EXIT_OK = 0
EXIT_UNREACHABLE = 1


class RemoteInspectError(RuntimeError):
    """SSH to the node failed, or `numa-align inspect` failed there; says which host and why."""


def _ssh_options(host: str, ssh_config: Path | None) -> dict[str, Any]:
    config = paramiko.SSHConfig.from_path(str(ssh_config)) if ssh_config else paramiko.SSHConfig()
    return config.lookup(host)


@contextmanager
def ssh_client(host: str, ssh_config: Path | None = None) -> Iterator[paramiko.SSHClient]:
    """A connected SSHClient for an ssh_config alias (or a plain host name)."""
    options = _ssh_options(host, ssh_config)
    hostname = options.get("hostname", host)
    port = int(options.get("port", 22))
    identities_only = options.get("identitiesonly", "no").lower() == "yes"
    with ExitStack() as stack:
        client = paramiko.SSHClient()
        stack.callback(client.close)
        client.load_system_host_keys()
        for known in options.get("userknownhostsfile", "").split():
            path = Path(known).expanduser()
            if path.exists():
                client.load_host_keys(str(path))
        strict = options.get("stricthostkeychecking", "yes").lower() == "yes"
        client.set_missing_host_key_policy(paramiko.RejectPolicy() if strict else paramiko.AutoAddPolicy())
        try:
            sock = _proxy(stack, options, hostname, port, ssh_config)
            client.connect(
                hostname,
                port=port,
                username=options.get("user") or os.environ.get("USER") or "root",
                key_filename=[str(Path(p).expanduser()) for p in options.get("identityfile", [])] or None,
                look_for_keys=not identities_only,
                allow_agent=not identities_only,
                timeout=float(options.get("connecttimeout", SSH_TIMEOUT)),
                banner_timeout=SSH_TIMEOUT,
                auth_timeout=SSH_TIMEOUT,
                sock=sock,
            )
        except (paramiko.SSHException, OSError) as exc:
            where = f" (ssh config {ssh_config})" if ssh_config else ""
            raise RemoteInspectError(f"{host}: cannot connect to {hostname}:{port}{where}: {exc}") from None
        yield client


def _proxy(stack: ExitStack, options: dict[str, Any], hostname: str, port: int,
           ssh_config: Path | None) -> Any:
    """The socket to reach the host through: a channel via the ProxyJump host, a ProxyCommand, or None."""
    jump = options.get("proxyjump", "none")
    if jump.lower() != "none":
        jump_alias = jump.split(",")[0].rpartition("@")[2]
        jump_client = stack.enter_context(ssh_client(jump_alias, ssh_config))
        transport = jump_client.get_transport()
        if transport is None:
            raise paramiko.SSHException(f"ProxyJump {jump}: no transport after connecting")
        return transport.open_channel("direct-tcpip", (hostname, port), ("127.0.0.1", 0))
    command = options.get("proxycommand", "none")
    if command.lower() != "none":
        return paramiko.ProxyCommand(command)
    return None


def run_remote(client: paramiko.SSHClient, host: str, command: str) -> str:
    """Run a command, return its stdout; a non-zero exit raises with the remote stderr."""
    _, stdout, stderr = client.exec_command(command, timeout=COMMAND_TIMEOUT)
    out = stdout.read().decode()
    err = stderr.read().decode().strip()
    status = stdout.channel.recv_exit_status()
    if status != 0:
        raise RemoteInspectError(f"{host}: `{command}` exited {status}: {err or '(no stderr)'}")
    return out


def remote_inspect(host: str, ssh_config: Path | None = None, command: str = DEFAULT_REMOTE_COMMAND) -> dict:
    """The node's `numa-align inspect --format json` report, parsed."""
    full = f"{command} --format json"
    with ssh_client(host, ssh_config) as client:
        out = run_remote(client, host, full)
    return parse_report(host, full, out)


def parse_report(host: str, command: str, out: str) -> dict:
    """What `command` (a `numa-align inspect --format json`) printed on `host`, as its report; RemoteInspectError
    when it is not one."""
    try:
        report = json.loads(out)
    except json.JSONDecodeError as exc:
        raise RemoteInspectError(f"{host}: `{command}` printed no JSON ({exc.msg}): {out[:200]!r}") from None
    if not isinstance(report, dict) or "pods" not in report:
        raise RemoteInspectError(f"{host}: `{command}` printed JSON without 'pods': not numa-align inspect")
    return report


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="show each node's pods with the NUMA nodes of their CPUs, memory and numa-align devices",
        description="Runs `numa-align inspect --format json` on each HOST over SSH.",
    )
    parser.add_argument("hosts", nargs="+", metavar="HOST", help="ssh_config alias or host name of a node")
    parser.add_argument("--ssh-config", type=Path, default=_default_ssh_config(),
                        help="ssh_config to read (default $NUMALAB_SSH_CONFIG, else none)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--remote-command", default=DEFAULT_REMOTE_COMMAND,
                        help=f"how to start the inspector on the node (default {DEFAULT_REMOTE_COMMAND!r})")
    parser.set_defaults(func=run)


def _default_ssh_config() -> Path | None:
    value = os.environ.get("NUMALAB_SSH_CONFIG")
    return Path(value) if value else None


def run(args: argparse.Namespace) -> int:
    if args.ssh_config is not None and not args.ssh_config.is_file():
        raise UsageError(f"--ssh-config {args.ssh_config}: no such file")
    reports: dict[str, dict] = {}
    failed = False
    for host in args.hosts:
        try:
            reports[host] = remote_inspect(host, args.ssh_config, args.remote_command)
        except RemoteInspectError as exc:
            print(f"numalab inspect: {exc}", file=sys.stderr)
            failed = True
    if args.format == "json":
        print(json.dumps(reports, indent=2))
    else:
        for host, report in reports.items():
            print(f"== {host}")
            print(format_table(report))
    return EXIT_UNREACHABLE if failed else EXIT_OK


def quote_command(argv: list[str]) -> str:
    """A remote command line from argv, quoted for the remote shell."""
    return " ".join(shlex.quote(arg) for arg in argv)
