"""Where Prometheus on the registry host finds numa-align's /metrics: one target per node that runs pods.

Pure, from the cluster model and each node's `numa_align_settings` (NUMA_METRICS_ADDR, the plugin's own
parser, default :9201). A node is left out, with the reason, when Prometheus could not reach it: metrics
disabled (NUMA_METRICS_ADDR empty), bound to loopback only, or numa-align running as the DaemonSet, whose
pod serves /metrics on its pod address (the registry host has no route to the pod networks).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.settings import SettingsError, read_settings

from numalab.model.cluster import Cluster
from numalab.model.errors import ValidationError

PROMETHEUS_PORT = 9090  # Debian's prometheus package's listen address, :9090
JOB = "numa-align"
NODE_LABEL = "kubernetes_node"  # not `node`: numa-align's per-cell gauges use `node` for the NUMA node id
SCRAPE_INTERVAL = "5s"  # the plugin polls the kubelet every 2 s: a pinned pod shows within seconds
SCRAPE_TIMEOUT = "4s"  # at most the interval (Prometheus refuses more)
RETENTION = "1d"  # a lab's series are read minutes after they are scraped
METRICS_ADDR = "NUMA_METRICS_ADDR"
_WILDCARDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class ScrapeTarget:
    node: str  # the Kubernetes node name, the target's NODE_LABEL
    target: str  # ADDRESS:PORT of its numa-align /metrics


@dataclass(frozen=True)
class ScrapePlan:
    targets: tuple[ScrapeTarget, ...]
    left_out: dict[str, str] = field(default_factory=dict)  # node -> why Prometheus does not scrape it


def scrape_plan(cluster: Cluster, settings: Mapping[str, Any], daemonset: Collection[str] = ()) -> ScrapePlan:
    """Targets in the cluster's node order. `settings`: node name -> its numa_align_settings (a mapping, or
    None for the defaults); `daemonset`: the nodes whose numa-align runs as the DaemonSet."""
    unknown = sorted(set(settings) - set(cluster.node_names))
    if unknown:
        raise ValidationError(f"{unknown[0]}.numa_align_settings",
                              f"{unknown[0]} runs no kubelet (nodes: {', '.join(cluster.node_names)})")
    targets, left_out = [], {}
    for node in cluster.nodes:
        if node.name in daemonset:
            left_out[node.name] = "numa-align runs as the DaemonSet: its /metrics is on the pod's address"
            continue
        bound = metrics_address(node.name, settings.get(node.name))
        if bound is None:
            left_out[node.name] = f"its metrics are disabled ({METRICS_ADDR} is empty)"
            continue
        address, port = bound
        if address in _WILDCARDS:
            address = str(node.address)
        elif address == "localhost" or _is_loopback(address):
            left_out[node.name] = f"numa-align's /metrics listens on {address} only (loopback)"
            continue
        host = f"[{address}]" if ":" in address else address
        targets.append(ScrapeTarget(node.name, f"{host}:{port}"))
    return ScrapePlan(tuple(targets), left_out)


def metrics_address(node: str, given: Any) -> tuple[str, int] | None:
    """(host, port) numa-align's /metrics binds on `node` ("" is every address), or None when disabled."""
    where = f"{node}.numa_align_settings"
    if given is not None and not isinstance(given, Mapping):
        raise ValidationError(where, f"expected a mapping of NUMA_* variables, got {type(given).__name__}")
    raw = (given or {}).get(METRICS_ADDR)
    if raw is None:
        return read_settings({}, {}, serving=False).metrics_addr  # the plugin's default, :9201
    try:
        return read_settings({METRICS_ADDR: str(raw)}, {}, serving=False).metrics_addr
    except SettingsError as exc:
        raise ValidationError(f"{where}.{METRICS_ADDR}", str(exc).removeprefix(f"{exc.variable}: ")) from None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name: Prometheus resolves it
