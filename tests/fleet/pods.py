"""Pods for the fleet tests, API-shaped as the API server returns them once bound."""

from __future__ import annotations

from typing import Any

from numalab.fleet.spec import NodeDescription, resolve_shape


def node(shape: str = "2cell-16", name: str = "fleet-00000", index: int = 0, **settings: Any) -> NodeDescription:
    """One node of `shape`; settings: kubelet settings overrides with '_' for '-'."""
    overrides = {key.replace("_", "-"): value for key, value in settings.items()}
    return NodeDescription(name, index, resolve_shape(shape, overrides))


def container(name: str = "main", cpu: str = "2", memory: str = "1Gi", limits: dict | None = None,
              extra: dict[str, str] | None = None) -> dict[str, Any]:
    """extra: further requests (= limits), e.g. {"hugepages-2Mi": "512Mi"}."""
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"name": name, "image": "x", "resources": {"requests": requests, "limits": dict(limits or requests)}}


def pod(name: str, *containers: dict[str, Any], on: str | None = "fleet-00000", namespace: str = "default",
        scheduler: str = "numa-aware", init: tuple[dict[str, Any], ...] = (), uid: str | None = None,
        **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = list(init)
    if on:
        spec["nodeName"] = on
    metadata = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Pending",
                                                                                             **status}}


def guaranteed(name: str, cpu: str = "2", memory: str = "1Gi", extra: dict[str, str] | None = None,
               on: str = "fleet-00000") -> dict[str, Any]:
    return pod(name, container(cpu=cpu, memory=memory, extra=extra), on=on)


def running(bound: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API shows it once the kubelet wrote it Running."""
    return {**bound, "status": {"phase": "Running"}}


def burstable(name: str, cpu: str = "500m", memory: str = "512Mi", on: str = "fleet-00000") -> dict[str, Any]:
    return pod(name, container(cpu=cpu, memory=memory, limits={"cpu": "2", "memory": "1Gi"}), on=on)
