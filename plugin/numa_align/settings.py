"""The plugin's settings, read once from the environment and the equal command-line flags.

Every value is checked here, before the plugin creates a socket: a bad one raises SettingsError, which
names the variable (or flag) so the CLI can exit 2 with one line.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from numa_align.cpulist import format_cpulist, parse_cpulist
from numa_align.devices import socket_name
from numa_align.guard_report import RECORD
from numa_align.kubelet_sources import DEFAULT_SOCKET
from numa_align.nrt import POLICIES, SCOPES
from numa_align.sysfs import NodeInfo, node_dir

SOCKET_DIR_CANDIDATES = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/lib/k0s/kubelet/device-plugins"),
    Path("/var/snap/microk8s/common/var/lib/kubelet/device-plugins"),
)
"""Where kubelet, k0s and microk8s keep kubelet.sock; the first that exists is used by default."""

UNIX_PATH_MAX = 107
"""Longest path a unix socket can be bound to (sun_path is 108 bytes with the final NUL)."""

LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "warn": logging.WARNING, "error": logging.ERROR}

Capacity = int | Literal["cpus"]

_EMPTY_IS_UNSET = ("node_name", "kubeconfig")
"""Options whose empty value means their default (a ConfigMap may carry them empty)."""
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A Node's name: a DNS subdomain (lower case, at most 253 characters)."""


@dataclass(frozen=True)
class Option:
    """One setting: its environment variable and the flag that overrides it."""

    variable: str
    flag: str
    help: str


OPTIONS = {
    "capacity": Option("NUMA_CAPACITY", "--capacity",
                       "devices per NUMA node (default 100), or 'cpus' for one device per usable CPU"),
    "socket_dir": Option("NUMA_SOCKET_DIR", "--socket-dir",
                         "the kubelet's device-plugins directory (default: the first existing of "
                         + ", ".join(str(p) for p in SOCKET_DIR_CANDIDATES) + ")"),
    "sysfs_root": Option("NUMA_SYSFS_ROOT", "--sysfs-root", "where sysfs is mounted (default /sys)"),
    "reserved_cpus": Option("NUMA_RESERVED_CPUS", "--reserved-cpus",
                            "cpulist of CPUs not advertised with NUMA_CAPACITY=cpus, e.g. 0,32"),
    "metrics_addr": Option("NUMA_METRICS_ADDR", "--metrics-addr",
                           "host:port of the Prometheus /metrics endpoint (default :9201; empty disables)"),
    "log_level": Option("NUMA_LOG_LEVEL", "--log-level", "debug, info, warning or error (default info)"),
    "rescan_interval": Option("NUMA_RESCAN_INTERVAL", "--rescan-interval",
                              "seconds between sysfs rescans for node health and CPU count (default 5)"),
    "nrt": Option("NUMA_ALIGN_NRT", "--nrt",
                  "true: publish this node's NodeResourceTopology object to the API server (default false)"),
    "node_name": Option("NUMA_ALIGN_NODE_NAME", "--node-name",
                        "this node's name in the API (default: $NODE_NAME, then the host name)"),
    "kubeconfig": Option("NUMA_ALIGN_KUBECONFIG", "--kubeconfig",
                         "kubeconfig file for publishing (default: the pod's service account)"),
    "topology_policy": Option("NUMA_ALIGN_TOPOLOGY_POLICY", "--topology-manager-policy",
                              "the kubelet's topologyManagerPolicy, published: " + ", ".join(POLICIES)
                              + " (default none)"),
    "topology_scope": Option("NUMA_ALIGN_TOPOLOGY_SCOPE", "--topology-manager-scope",
                             "the kubelet's topologyManagerScope, published: " + ", ".join(SCOPES)
                             + " (default container)"),
    "pod_resources_socket": Option("NUMA_ALIGN_POD_RESOURCES_SOCKET", "--pod-resources-socket",
                                   f"the kubelet's PodResources socket (default {DEFAULT_SOCKET})"),
    "poll_interval": Option("NUMA_ALIGN_POLL_INTERVAL", "--poll-interval",
                            "seconds between PodResources polls for the NRT object and the per-node gauges "
                            "(default 2)"),
    "guard_record": Option("NUMA_ALIGN_GUARD_RECORD", "--guard-record",
                           "numa-lab's kubelet guard's record of the checkpoints it moved aside, shown as a metric "
                           f"and an Event when written at this boot (default {RECORD})"),
    "cgroup_root": Option("NUMA_ALIGN_CGROUP_ROOT", "--cgroup-root",
                          "the host's cgroup v2 mount, read by the cpuset audit (default: <sysfs root>/fs/cgroup)"),
}


class SettingsError(ValueError):
    """A setting with a value the plugin cannot run with; str() is one line naming the variable."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable


@dataclass(frozen=True)
class Settings:
    """What the plugin runs with. capacity: devices per node or "cpus"; rescan_interval and poll_interval
    in seconds; nrt: publish the NodeResourceTopology object (topology_policy and topology_scope are the
    kubelet's, copied into it)."""

    capacity: Capacity = 100
    socket_dir: Path | None = None
    sysfs_root: Path = Path("/sys")
    reserved_cpus: frozenset[int] = frozenset()
    metrics_addr: tuple[str, int] | None = ("", 9201)
    log_level: int = logging.INFO
    rescan_interval: float = 5.0
    nrt: bool = False
    node_name: str | None = None
    """Given, or (with nrt) $NODE_NAME or the host name; None when nrt is off and none was given."""
    kubeconfig: Path | None = None
    """None: the pod's service account."""
    topology_policy: str = "none"
    topology_scope: str = "container"
    pod_resources_socket: Path = DEFAULT_SOCKET
    poll_interval: float = 2.0
    guard_record: Path = RECORD
    cgroup_root: Path | None = None
    """None: sysfs_root/fs/cgroup (`cgroup_tree`), so the DaemonSet's /host/sys mount serves both."""

    @property
    def cgroup_tree(self) -> Path:
        return self.cgroup_root or self.sysfs_root / "fs" / "cgroup"

    def check_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        """Reserved CPUs must exist on the host; raise SettingsError naming NUMA_RESERVED_CPUS if not."""
        known = frozenset().union(*(node.cpus for node in nodes))
        unknown = self.reserved_cpus - known
        if unknown:
            raise SettingsError(
                OPTIONS["reserved_cpus"].variable,
                f"CPUs {format_cpulist(unknown)} are on no online NUMA node (host CPUs: {format_cpulist(known)})",
            )


def read_settings(env: Mapping[str, str], flags: Mapping[str, str | None], *, serving: bool = True) -> Settings:
    """Build Settings from `env` and flag values (a flag beats its variable); serving=False skips the
    socket directory, which `discover` does not need. The node name defaults (with NRT publishing on) to
    env's NODE_NAME, which the DaemonSet sets from spec.nodeName, then to the host name, lower case as
    the kubelet makes it."""
    values: dict = {}
    for key, option in OPTIONS.items():
        where, raw = option.flag, flags.get(key)
        if raw is None:
            where, raw = option.variable, env.get(option.variable)
        if key == "socket_dir":
            if serving:
                values[key] = _socket_dir(where, raw)
            continue
        if raw is None or (key in _EMPTY_IS_UNSET and not raw.strip()):
            continue
        values[key] = _PARSERS[key](where, raw)
    if values.get("nrt") and "node_name" not in values:
        given = env.get("NODE_NAME")
        origin = " (the default, from NODE_NAME)" if given else " (the default, the host name)"
        values["node_name"] = _node_name(OPTIONS["node_name"].variable, given or socket.gethostname().lower(), origin)
    return Settings(**values)


def _capacity(where: str, raw: str) -> Capacity:
    text = raw.strip()
    if text == "cpus":
        return "cpus"
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(where, f"{raw!r} is not a device count (expected an integer >= 1, or 'cpus')")
    return int(text)


def _socket_dir(where: str, raw: str | None) -> Path:
    if raw is None or not raw.strip():
        for candidate in SOCKET_DIR_CANDIDATES:
            if candidate.is_dir():
                return candidate
        tried = ", ".join(str(p) for p in SOCKET_DIR_CANDIDATES)
        raise SettingsError(where, f"not set and none of {tried} exists; is the kubelet installed here?")
    path = Path(raw)
    if not path.is_absolute():
        raise SettingsError(where, f"{raw!r} is not an absolute path")
    if not path.exists():
        raise SettingsError(where, f"{raw} does not exist (the kubelet creates it; start the kubelet first)")
    if not path.is_dir():
        raise SettingsError(where, f"{raw} is not a directory")
    longest = path / socket_name(9999)
    if len(str(longest)) > UNIX_PATH_MAX:
        raise SettingsError(where, f"{raw} is too long for unix sockets ({longest} > {UNIX_PATH_MAX} bytes)")
    return path


def _sysfs_root(where: str, raw: str) -> Path:
    path = Path(raw)
    if not node_dir(path).is_dir():
        raise SettingsError(where, f"{node_dir(path)} is not a directory (expected the mount point of sysfs)")
    return path


def _reserved_cpus(where: str, raw: str) -> frozenset[int]:
    try:
        return parse_cpulist(raw)
    except ValueError as exc:
        raise SettingsError(where, str(exc)) from None


def _metrics_addr(where: str, raw: str) -> tuple[str, int] | None:
    text = raw.strip()
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SettingsError(where, f"{raw!r} is not host:port (e.g. :9201, 127.0.0.1:9201, [::1]:9201)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _log_level(where: str, raw: str) -> int:
    level = LOG_LEVELS.get(raw.strip().lower())
    if level is None:
        raise SettingsError(where, f"{raw!r} is not one of debug, info, warning, error")
    return level


def _seconds(where: str, raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise SettingsError(where, f"{raw!r} is not a number of seconds in (0, 3600]")
    return seconds


def _boolean(where: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise SettingsError(where, f"{raw!r} is not true or false")
    return text == "true"


def _node_name(where: str, raw: str, origin: str = "") -> str:
    name = raw.strip()
    if len(name) > 253 or not _NODE_NAME.match(name):
        raise SettingsError(where, f"{raw!r}{origin} is not a node name (lower-case DNS subdomain, e.g. worker-1); "
                                   "give the kubelet's node name")
    return name


def _kubeconfig(where: str, raw: str) -> Path:
    path = Path(raw.strip())
    if not path.is_file():
        raise SettingsError(where, f"{raw!r} is not a file (a kubeconfig; empty or unset: the service account)")
    return path


def _choice(known: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(where: str, raw: str) -> str:
        if raw.strip() not in known:
            raise SettingsError(where, f"{raw!r} is not one of {', '.join(known)} (the kubelet's spelling)")
        return raw.strip()

    return parse


def _absolute_path(where: str, raw: str) -> Path:
    path = Path(raw.strip())
    if not path.is_absolute():
        raise SettingsError(where, f"{raw!r} is not an absolute path")
    return path


def _unix_socket(where: str, raw: str) -> Path:
    path = _absolute_path(where, raw)
    if len(str(path)) > UNIX_PATH_MAX:
        raise SettingsError(where, f"{raw} is too long for a unix socket (> {UNIX_PATH_MAX} bytes)")
    return path


_PARSERS = {
    "capacity": _capacity,
    "sysfs_root": _sysfs_root,
    "reserved_cpus": _reserved_cpus,
    "metrics_addr": _metrics_addr,
    "log_level": _log_level,
    "rescan_interval": _seconds,
    "nrt": _boolean,
    "node_name": _node_name,
    "kubeconfig": _kubeconfig,
    "topology_policy": _choice(POLICIES),
    "topology_scope": _choice(SCOPES),
    "pod_resources_socket": _unix_socket,
    "poll_interval": _seconds,
    "guard_record": _absolute_path,
    "cgroup_root": _absolute_path,
}
