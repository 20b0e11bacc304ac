"""numa-align's settings on a node: the user's `numa_align_settings` over the defaults, with the kubelet's
reserved CPUs as NUMA_RESERVED_CPUS, so that with NUMA_CAPACITY=cpus the plugin advertises only the CPUs
pods can get."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numa_align.cpulist import format_cpulist

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
