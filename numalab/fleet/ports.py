"""Loopback ports for the control plane's processes: fixed ones checked free, the rest picked free by the kernel.

Every process binds 127.0.0.1 only (the simulation never listens off this machine). A port is checked by
binding it before anything starts, so a port in use is refused with its number and the component that
wanted it instead of a process dying on it half-way through the start.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable, Mapping

from numalab.fleet.errors import FleetError

HOST = "127.0.0.1"


def port_problem(port: int, host: str = HOST) -> str | None:
    """Why `port` cannot be listened on at `host` (in use, not permitted), or None when it is free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "in use"
            return exc.strerror or str(exc)
    return None


def free_port(host: str = HOST, taken: Iterable[int] = ()) -> int:
    """A port the kernel says is free now on `host`, not one of `taken` (it may be taken again before use)."""
    avoid = set(taken)
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port not in avoid:
            return port
    raise FleetError(f"no free port on {host} after 100 tries")


def assign_ports(names: Iterable[str], fixed: Mapping[str, int] | None = None, host: str = HOST) -> dict[str, int]:
    """name -> port for every name: `fixed` ones checked, the others free; FleetError names a bad or busy one."""
    wanted = list(names)
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(wanted))
    if unknown:
        raise FleetError(f"ports given for unknown components {', '.join(unknown)} (known: {', '.join(wanted)})")
    owners: dict[int, str] = {}
    for name, port in fixed.items():
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise FleetError(f"port {port!r} for {name} is not a TCP port number (1-65535)")
        if port in owners:
            raise FleetError(f"port {port} is given to both {owners[port]} and {name}")
        owners[port] = name
        problem = port_problem(port, host)
        if problem:
            raise FleetError(f"port {port} for {name} on {host} is {problem}; free it or choose another port")
    ports = dict(fixed)
    for name in wanted:
        if name not in ports:
            ports[name] = free_port(host, ports.values())
    return {name: ports[name] for name in wanted}
