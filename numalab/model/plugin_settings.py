"""numa-align's settings on a node: the user's `numa_align_settings` over the defaults, with the kubelet's
reserved CPUs as NUMA_RESERVED_CPUS, so that with NUMA_CAPACITY=cpus the plugin advertises only the CPUs
pods can get."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numa_align.cpulist import format_cpulist
from numa_align.settings import SettingsError, read_settings

from numalab.model.errors import ValidationError

DEFAULT_SETTINGS = {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins"}
RESERVED = "NUMA_RESERVED_CPUS"
KUBELET_DEFAULT_SCOPE = "container"
# The plugin's own NodeResourceTopology settings (numa_align.settings): set by numa-lab, never by the user.
NRT_KEYS = ("NUMA_ALIGN_NRT", "NUMA_ALIGN_TOPOLOGY_POLICY", "NUMA_ALIGN_TOPOLOGY_SCOPE", "NUMA_ALIGN_KUBECONFIG",
            "NUMA_ALIGN_NODE_NAME")


def plugin_settings(given: Mapping[str, Any] | None, reserved_cpus: frozenset[int]) -> dict[str, str]:
    """The plugin's NUMA_* environment; a NUMA_RESERVED_CPUS that disagrees with the kubelet is refused."""
    settings = {key: str(value) for key, value in (given or {}).items()}
    bad = [key for key in settings if not key.startswith("NUMA_")]
    if bad:
        raise ValidationError(f"numa_align_settings.{bad[0]}", "the plugin's settings are NUMA_* variables")
    reserved = format_cpulist(reserved_cpus)
    if settings.get(RESERVED, reserved) != reserved:
        raise ValidationError(f"numa_align_settings.{RESERVED}",
                              f"{settings[RESERVED]!r} but the kubelet reserves {reserved or 'no CPU'} "
                              "(reserved-cpus); leave it out, numa-lab sets it from the kubelet policy")
    owned = [key for key in settings if key in NRT_KEYS]
    if owned:
        raise ValidationError(f"numa_align_settings.{owned[0]}",
                              "numa-lab sets it from numa_align_nrt and the kubelet policy; leave it out")
    if reserved:
        settings[RESERVED] = reserved
    return {**DEFAULT_SETTINGS, **settings}


def nrt_settings(policy: str, scope: str | None, kubeconfig: str | None = None,
                 node_name: str | None = None) -> dict[str, str]:
    """What makes the plugin publish its node's NodeResourceTopology with the kubelet's topology manager
    policy and scope (the kubelet's default scope when none is set); a kubeconfig and node name for the
    unit, none for the DaemonSet (its service account, and NODE_NAME from spec.nodeName)."""
    settings = {"NUMA_ALIGN_NRT": "true", "NUMA_ALIGN_TOPOLOGY_POLICY": policy,
                "NUMA_ALIGN_TOPOLOGY_SCOPE": scope or KUBELET_DEFAULT_SCOPE}
    if kubeconfig:
        settings["NUMA_ALIGN_KUBECONFIG"] = kubeconfig
    if node_name:
        settings["NUMA_ALIGN_NODE_NAME"] = node_name
    return settings


DAEMONSET_OWNED = ("NUMA_SOCKET_DIR", "NUMA_SYSFS_ROOT")
"""Set by the DaemonSet's pod template itself (its hostPath mount and sysfs mount), not per node."""
METRICS_ADDR = "NUMA_METRICS_ADDR"


@dataclass(frozen=True)
class DaemonSetSettings:
    """What one DaemonSet serves every node with: the one pod template's socket dir and metrics port, and each
    node's own settings (its file entry: numa_align.node_settings)."""

    socket_dir: str
    metrics_port: int | None
    nodes: Mapping[str, Mapping[str, str]]

    def nodes_json(self) -> str:
        """The ConfigMap's file of every node's settings: one node a line, sorted, so a diff reads well."""
        lines = [f"{json.dumps(node)}: {json.dumps(dict(sorted(self.nodes[node].items())))}"
                 for node in sorted(self.nodes)]
        return "{\n" + ",\n".join(lines) + "\n}\n"


def daemonset_settings(per_node: Mapping[str, Mapping[str, str]]) -> DaemonSetSettings:
    """Every node's plugin settings (plugin_settings + nrt_settings) as one DaemonSet runs them. The pod
    template is shared, so the kubelet's device-plugins dir (a hostPath) and the metrics port (the readiness
    probe's) must be the same on every node: a difference is refused naming the nodes and values."""
    if not per_node:
        raise ValidationError("numa_align_install", "no node runs the numa-align DaemonSet")
    socket_dir = _agreed(per_node, "NUMA_SOCKET_DIR", DEFAULT_SETTINGS["NUMA_SOCKET_DIR"])
    metrics = _agreed(per_node, METRICS_ADDR, None)
    try:
        address = read_settings({} if metrics is None else {METRICS_ADDR: metrics}, {}, serving=False).metrics_addr
    except SettingsError as exc:
        raise ValidationError(f"numa_align_settings.{METRICS_ADDR}", str(exc)) from None
    nodes = {node: {k: v for k, v in settings.items() if k not in DAEMONSET_OWNED}
             for node, settings in per_node.items()}
    return DaemonSetSettings(socket_dir, None if address is None else address[1], nodes)


def _agreed(per_node: Mapping[str, Mapping[str, str]], key: str, default: str | None) -> str | None:
    values = {node: settings.get(key, default) for node, settings in per_node.items()}
    if len(set(values.values())) > 1:
        listed = ", ".join(f"{node}={value!r}" for node, value in sorted(values.items()))
        raise ValidationError(f"numa_align_settings.{key}",
                              f"differs between the nodes one numa-align DaemonSet serves ({listed}): its pods share "
                              "one template; set it the same on every node, or use numa_align_install: systemd")
    return next(iter(values.values()))
