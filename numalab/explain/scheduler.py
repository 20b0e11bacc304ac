"""Which scheduler would bind the pod, and whether the NUMA-aware one's filter passes a node.

The filter mirrors scheduler-plugins v0.35.4-devel pkg/noderesourcetopology/filter.go (Filter,
singleNUMAPodLevelHandler, singleNUMAContainerLevelHandler, resourcesAvailableInAnyNUMANodes) and
numaresources.go (isHostLevelResource, isNUMAAffineResource, isResourceSetSuitable): it reads the object's
own policy and scope attributes and each zone's `available`, and checks only under single-numa-node.
"""

from __future__ import annotations

from collections.abc import Mapping

from numalab.explain.node_state import NodeState
from numalab.explain.requests import CPU, HOST_LEVEL, PodRequest, is_memory, scheduling_requests

NUMA_AWARE = "numa-aware"
DEFAULT = "default-scheduler"


def scheduler_of(pod: PodRequest) -> str:
    if pod.node_name:
        return f"none: spec.nodeName binds it to {pod.node_name} directly"
    if pod.scheduler_name == DEFAULT:
        return f"{DEFAULT} (binds without looking at NUMA cells)"
    if pod.scheduler_name == NUMA_AWARE:
        return f"{NUMA_AWARE} (NodeResourceTopologyMatch)"
    return f"{pod.scheduler_name} (not a scheduler numa-lab runs)"


def _native(name: str) -> bool:
    return "/" not in name or name.startswith("kubernetes.io/")


def _host_level(name: str) -> bool:
    return name in HOST_LEVEL or not _native(name)


def _fits(pod: PodRequest, state: NodeState, free: Mapping[int, dict[str, int]],
          requests: Mapping[str, int]) -> tuple[int | None, str]:
    """resourcesAvailableInAnyNUMANodes: (the lowest cell every resource fits in, or None; the resource that
    failed)."""
    fitting = set(free)
    for name, quantity in requests.items():
        if not quantity:
            continue
        if name not in state.allocatable:
            return None, name
        listed = [cell for cell, resources in free.items() if name in resources]
        if not listed and _host_level(name):
            continue
        affine = name == CPU or is_memory(name)
        suitable = {cell for cell in listed
                    if (not pod.guaranteed and affine) or _in_units(name, free[cell][name]) >= quantity}
        fitting &= suitable
        if not fitting:
            return None, name
    return min(fitting), ""


def _in_units(name: str, value: int) -> int:
    return value * 1000 if name == CPU else value


def numa_aware_filter(pod: PodRequest, state: NodeState) -> str:
    """pass / fail with the plugin's status message, from the object as the scheduler reads it."""
    if pod.qos == "BestEffort" and all(_native(n) for c in pod.containers for n in c.requests):
        return "pass: BestEffort pod without extended resources (not checked)"
    if state.nrt_policy != "single-numa-node":
        return f"pass: the object's policy is {state.nrt_policy or 'unset'}, the filter checks only single-numa-node"
    free = {c.id: dict(c.available) for c in state.cells}
    if state.nrt_scope == "pod":
        cell, failed = _fits(pod, state, free, scheduling_requests(pod))
        return f"pass: cell {cell} fits the pod (scope pod)" if cell is not None else \
            f"fail: cannot align pod ({failed} fits in no single cell)"
    if state.nrt_scope != "container":
        return f"pass: the object's scope is {state.nrt_scope or 'unset'}, the filter checks nothing"
    placed = []
    for container in pod.containers:
        cell, failed = _fits(pod, state, free, container.requests)
        if cell is None:
            kind = "" if container.kind == "app" else f"{container.kind} "
            return f"fail: cannot align {kind}container ({container.name}: {failed} fits in no single cell)"
        if container.kind == "app":
            for name, quantity in container.requests.items():
                affine = name == CPU or is_memory(name)
                if name in free[cell] and quantity and (pod.guaranteed or not affine):
                    free[cell][name] -= quantity // 1000 if name == CPU else quantity
            placed.append(f"{container.name} on cell {cell}")
    return f"pass: {', '.join(placed)} (scope container)"
