"""Hand-built API objects for explain tests: NRT objects with costs, Nodes, kubelet /configz answers, pods."""

from __future__ import annotations

import json
from typing import Any

from numalab.explain.requests import pod_request

GI, MI = 2**30, 2**20


def res(name: str, capacity: int, allocatable: int, available: int) -> dict[str, str]:
    return {"name": name, "capacity": str(capacity), "allocatable": str(allocatable), "available": str(available)}


def cell(numa: int, cpus: tuple[int, int, int], memory: tuple[int, int, int] = (8 * GI, 8 * GI, 8 * GI),
         costs: list[int] | None = None, extra: list[dict[str, str]] | None = None,
         cores: tuple[int, int] | None = None) -> dict[str, Any]:
    """One zone: cpus and memory as (capacity, allocatable, available); costs: distances to cells 0..n-1; cores:
    numa-align's (availablePhysicalCpus, freeCores) zone attributes."""
    zone: dict[str, Any] = {"name": f"node-{numa}", "type": "Node"}
    if costs is not None:
        zone["costs"] = [{"name": f"node-{i}", "value": d} for i, d in enumerate(costs)]
    if cores is not None:
        zone["attributes"] = [{"name": "availablePhysicalCpus", "value": str(cores[0])},
                              {"name": "freeCores", "value": str(cores[1])}]
    zone["resources"] = [res("cpu", *cpus), res("memory", *memory), *(extra or [])]
    return zone


def nrt(node: str, zones: list[dict[str, Any]], policy: str = "single-numa-node", scope: str = "container",
        allocations: dict[str, Any] | None = None, **attributes: str) -> dict[str, Any]:
    """attributes: further object attributes (cpusPerCore, cpuManagerPolicy, ...) by name."""
    meta: dict[str, Any] = {"name": node,
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "u"}],
                            "annotations": {"numa-align/allocations": json.dumps(allocations or {})}}
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": meta,
            "zones": zones, "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                                           {"name": "topologyManagerScope", "value": scope},
                                           *({"name": k, "value": v} for k, v in attributes.items())]}


def node(name: str, cpu: str = "16", memory: str = "32Gi", **extra: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", **extra}}}


def configz(policy: str = "single-numa-node", scope: str = "container", memory: str = "Static",
            cpu_options: dict[str, str] | None = None,
            topology_options: dict[str, str] | None = None) -> dict[str, Any]:
    return {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": cpu_options or {},
            "memoryManagerPolicy": memory, "topologyManagerPolicy": policy, "topologyManagerScope": scope,
            "topologyManagerPolicyOptions": topology_options or {}}


def container(name: str, cpu: str = "2", memory: str = "1Gi", kind: str = "app", **extra: str) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory, **{k.replace("__", "/").replace("_", "-"): v for k, v in extra.items()}}
    spec: dict[str, Any] = {"name": name, "image": "x", "resources": {"requests": amounts, "limits": amounts}}
    return spec


def pod_spec(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": list(containers), "initContainers": list(init), **spec}}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any):
    return pod_request(pod_spec(*containers, init=init, **spec), "test pod")
