"""Names and devices of the `numa-align/numa-N` resources: pure functions, no I/O.

The names are those of the Go ChessCom k8s-numa-resource-plugin, so pods written for it run unchanged.
"""

from __future__ import annotations

import re
from typing import Literal

from numa_align.api import deviceplugin_v1beta1_pb2 as api

RESOURCE_DOMAIN = "numa-align"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
NODE_ENV = "NUMA_NODE"
"""The variable Allocate puts in a container's environment: the id of its NUMA node."""

_DEVICE_ID = re.compile(r"^numa-(\d+)-(\d+)$")
_RESOURCE = re.compile(rf"{re.escape(RESOURCE_DOMAIN)}/numa-(0|[1-9][0-9]*)")


def resource_name(node: int) -> str:
    return f"{RESOURCE_DOMAIN}/numa-{node}"


def node_of_resource(name: str) -> int | None:
    """N of a name resource_name(N) gives, None for any other: the one parse every reader of these names shares.

    Only the canonical form counts (no zero padding, sign or non-ASCII digit): the plugin registers that and
    nothing else, so "numa-align/numa-01" in a pod spec is a resource the kubelet will never hand out.
    """
    match = _RESOURCE.fullmatch(name)
    return int(match.group(1)) if match else None


def socket_name(node: int) -> str:
    """File name of node N's socket in the kubelet's directory; also the `endpoint` it registers."""
    return f"numa-{node}.sock"


def device_id(node: int, index: int) -> str:
    """Stable across restarts: the same node and index always give the same id (<= 63 chars)."""
    return f"numa-{node}-{index}"


def parse_device_id(text: str) -> tuple[int, int] | None:
    """(node, index) of an id made by device_id, or None for anything else."""
    match = _DEVICE_ID.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def device_count(cpus: frozenset[int], capacity: int | Literal["cpus"], reserved: frozenset[int]) -> int:
    """Devices a node advertises: the fixed capacity, or its CPUs minus the reserved ones."""
    if capacity == "cpus":
        return len(cpus - reserved)
    return capacity


def build_devices(node: int, count: int, healthy: bool) -> tuple[api.Device, ...]:
    """The device list of numa-N: every device carries TopologyInfo {N}."""
    health = HEALTHY if healthy else UNHEALTHY
    topology = api.TopologyInfo(nodes=[api.NUMANode(ID=node)])
    return tuple(api.Device(ID=device_id(node, i), health=health, topology=topology) for i in range(count))
