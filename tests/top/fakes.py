"""API-shaped dicts for `numalab top` tests: NRT objects, Nodes and Pods as the API returns them, built by hand."""

from __future__ import annotations

import json
from typing import Any

from numa_align.nrt_api import ALLOCATIONS_ANNOTATION, API_VERSION

GI, MI = 2**30, 2**20

Triple = tuple[int | str, int | str, int | str]


def resource(name: str, values: Triple) -> dict[str, str]:
    capacity, allocatable, available = values
    return {"name": name, "capacity": str(capacity), "allocatable": str(allocatable), "available": str(available)}


def zone(numa_id: int, cpu: Triple | None = None, memory: Triple | None = None,
         hugepages: dict[str, Triple] | None = None, devices: dict[str, Triple] | None = None) -> dict[str, Any]:
    resources = []
    if cpu is not None:
        resources.append(resource("cpu", cpu))
    if memory is not None:
        resources.append(resource("memory", memory))
    resources += [resource(f"hugepages-{size}", v) for size, v in (hugepages or {}).items()]
    resources += [resource(name, v) for name, v in (devices or {}).items()]
    return {"name": f"node-{numa_id}", "type": "Node", "costs": [{"name": f"node-{numa_id}", "value": 10}],
            "resources": resources}


def nrt(node: str, zones: list[dict[str, Any]], allocations: dict[str, Any] | None = None,
        policy: str = "single-numa-node", scope: str = "pod") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": node, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                                   "uid": f"uid-{node}"}]}
    if allocations is not None:
        metadata["annotations"] = {ALLOCATIONS_ANNOTATION: json.dumps(allocations)}
    return {"apiVersion": API_VERSION, "kind": "NodeResourceTopology", "metadata": metadata,
            "zones": zones,
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope},
                           {"name": "nodeTopologyPodsFingerprint", "value": "pfp0v001abcdef"}]}


def node(name: str, numa_ids: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "16Gi", **{f"numa-align/numa-{n}": "3" for n in numa_ids}}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def pod(key: str, node_name: str, phase: str = "Running", qos: str = "Guaranteed") -> dict[str, Any]:
    namespace, name = key.split("/")
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"nodeName": node_name},
            "status": {"phase": phase, "qosClass": qos}}


def two_cell_worker(name: str = "worker-1") -> dict[str, Any]:
    """4 CPUs per cell, CPU 0's cell has one reserved; two pods pinned on node-0, one on node-1."""
    allocatable0 = 8 * GI - 1124 * MI
    return nrt(name, [
        zone(0, cpu=(4, 3, 0), memory=(8 * GI, allocatable0, allocatable0 - 3 * GI),
             hugepages={"2Mi": (512 * MI, 512 * MI, 512 * MI)}, devices={"numa-align/numa-0": (3, 3, 1)}),
        zone(1, cpu=(4, 4, 2), memory=(8 * GI, 8 * GI, 6 * GI), devices={"numa-align/numa-1": (4, 4, 3)}),
    ], allocations={
        "default/pinned-a": {"cpus": "1-2", "numa_nodes": [0], "memory": {"0": 2 * GI},
                             "devices": {"numa-align/numa-0": 1}},
        "default/pinned-b": {"cpus": "3", "numa_nodes": [0], "memory": {"0": GI},
                             "devices": {"numa-align/numa-0": 1}},
        "ml/trainer-7f9c": {"cpus": "6-7", "numa_nodes": [1], "memory": {"1": 2 * GI},
                            "devices": {"numa-align/numa-1": 1}},
    })


def sample_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """worker-1 (two cells, three pinned pods), worker-2 (sparse node-0/node-2, no SMT, a memory-only
    node-3, one CPU held by a pod it does not list), a stale NRT for worker-3, and `server` with no NRT."""
    worker2 = nrt("worker-2", [
        zone(0, cpu=(2, 1, 0), memory=(4 * GI, 3 * GI, 2 * GI), devices={"numa-align/numa-0": (1, 1, 0)}),
        zone(2, cpu=(6, 6, 3), memory=(4 * GI, 4 * GI, 2 * GI), devices={"numa-align/numa-2": (6, 6, 4)}),
        zone(3, memory=(16 * GI, 16 * GI, 12 * GI)),
    ], allocations={
        "prod/db-0": {"cpus": "1", "numa_nodes": [0], "memory": {"0": GI}, "devices": {"numa-align/numa-0": 1}},
        "prod/cache-1": {"cpus": "4-5", "numa_nodes": [2], "memory": {"2": 2 * GI, "3": 4 * GI},
                         "devices": {"numa-align/numa-2": 2}},
    }, policy="restricted")
    worker3 = nrt("worker-3", [zone(0, cpu=(2, 2, 1), memory=(2 * GI, 2 * GI, 2 * GI))],
                  allocations={"default/old-job": {"cpus": "1", "numa_nodes": [0]}})
    nrts = [two_cell_worker(), worker2, worker3]
    nodes = [node("worker-1"), node("worker-2", (0, 2)), {"metadata": {"name": "server"}, "status": {}}]
    pods = [pod("default/pinned-a", "worker-1"), pod("default/pinned-b", "worker-1"),
            pod("ml/trainer-7f9c", "worker-1"), pod("prod/db-0", "worker-2"), pod("prod/cache-1", "worker-2"),
            pod("kube-system/coredns-1", "server", qos="Burstable")]
    return nrts, nodes, pods


class FakeSource:
    """Stands in for the API reader: serves the given lists, filtering pods by node as a fieldSelector would."""

    def __init__(self, nrts: list[dict[str, Any]], nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                 leases: list[dict[str, Any]] | None = None) -> None:
        self._nrts, self._nodes, self._pods, self._leases = nrts, nodes, pods, leases
        self.pod_node_asked: list[str | None] = []

    def nrts(self) -> list[dict[str, Any]]:
        return self._nrts

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes

    def pods(self, node: str | None) -> list[dict[str, Any]]:
        self.pod_node_asked.append(node)
        return [p for p in self._pods if node is None or p["spec"]["nodeName"] == node]

    def leases(self) -> list[dict[str, Any]] | None:
        return self._leases


def lease(node: str, renewed: str, duration: int = 120) -> dict[str, Any]:
    """numa-align's Lease for `node`, last renewed at `renewed` (RFC 3339)."""
    return {"metadata": {"name": f"numa-align-{node}", "namespace": "kube-system"},
            "spec": {"holderIdentity": f"numa-align@{node}", "leaseDurationSeconds": duration, "renewTime": renewed}}
