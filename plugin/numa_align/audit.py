"""The auditor's judgement: each pinned container's real cpuset against the kubelet's assignment and one cell.

Pure: the kubelet's PodResources List answer, the cpusets read from the cgroup tree (cgroups.py), the pods
the API lists (for the pod UIDs and container ids that name the cgroups) and the sysfs topology in; an
`Audit` out, which becomes gauges (metrics.py) and the `numa-align/audit` annotation `numalab top` shows.

- drift: the real cpuset.cpus.effective is not the CPUs the kubelet assigned, or (when the Memory Manager
  placed the container's memory) cpuset.mems.effective is not the NUMA nodes it chose: someone changed the
  cgroup behind the kubelet's back, or the kubelet failed to apply its own decision.
- split: a NUMA node holding some of the container's CPUs is missing from its mems, so those CPUs reach only
  remote memory. Mems wider than the CPUs' cells (no Memory Manager: every node allowed) are not a split:
  the kernel still allocates on the local node first.
- per-cell CPUs: CPUs of each NUMA node in the real cpusets of the pinned containers (each CPU once), what
  runs there whatever the kubelet believes (numa_align_node_cpus_allocated is its belief): a pile-up on
  cell 0 shows here.
- stranded CPUs: the node's free allocatable CPUs minus the largest block free in one cell, the CPUs a pod
  that must fit in one cell can never get however small it is (from PodResources alone, cgroups or not).

Why an annotation on the NodeResourceTopology object and not attributes: `numalab top` reads that object
already, the lists of offending containers are structured (JSON, as the allocations annotation), and the
zones' attributes are the scheduler's, which should carry only what it reads. It changes only when a
count, a list or a cell's CPUs change, so the object is still written only on change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numa_align.cgroups import Cpuset

if TYPE_CHECKING:
    from numa_align.api import podresources_v1_pb2 as pb
    from numa_align.nrt import Allocatable, ExclusiveUse
    from numa_align.sysfs import HostTopology

ANNOTATION = "numa-align/audit"
CPU = "cpu"  # numa_align.nrt.CPU; not imported, so numalab can read ANNOTATION without the protobuf modules

Key = tuple[str, str, str]
"""(namespace, pod, container)."""


@dataclass(frozen=True)
class Pinned:
    """A container holding exclusive CPUs, as the kubelet assigned them; mems: the NUMA nodes the Memory
    Manager placed its memory on (empty when it placed none)."""

    namespace: str
    pod: str
    container: str
    cpus: frozenset[int]
    mems: frozenset[int] = frozenset()

    @property
    def key(self) -> Key:
        return (self.namespace, self.pod, self.container)

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


@dataclass(frozen=True)
class Finding:
    pinned: Pinned
    real: Cpuset
    drift: bool
    split: bool


@dataclass(frozen=True)
class PodCgroups:
    """What names a pod's containers' cgroups: its UID and each running container's id ("containerd://…")."""

    uid: str
    containers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Audit:
    """One poll's audit. readable False: the cgroup tree could not be read (`why`), findings unknown."""

    readable: bool
    findings: tuple[Finding, ...] = ()
    not_found: tuple[Pinned, ...] = ()
    """Pinned containers with no cgroup found yet (starting, or restarted under an id not listed yet)."""
    cells: Mapping[int, int] = field(default_factory=dict)
    stranded: int = 0
    why: str = ""

    @property
    def split(self) -> list[str]:
        return sorted(f.pinned.name for f in self.findings if f.split)

    @property
    def drift(self) -> list[str]:
        return sorted(f.pinned.name for f in self.findings if f.drift)

    def summary(self) -> dict[str, Any]:
        """What the annotation holds: nothing that changes while the node is quiet."""
        if not self.readable:
            return {"readable": False, "why": self.why, "stranded": self.stranded}
        return {"readable": True, "split": self.split, "drift": self.drift,
                "cells": {str(node): cpus for node, cpus in sorted(self.cells.items())}, "stranded": self.stranded}

    def annotation(self) -> dict[str, str]:
        return {ANNOTATION: json.dumps(self.summary(), sort_keys=True, separators=(",", ":"))}


def pinned_containers(listed: pb.ListPodResourcesResponse) -> list[Pinned]:
    """Every listed container with exclusive CPUs (cpu_ids), with the NUMA nodes of its memory blocks."""
    found = []
    for pod in listed.pod_resources:
        for container in pod.containers:
            if container.cpu_ids:
                mems = {numa.ID for block in container.memory for numa in block.topology.nodes if numa.ID >= 0}
                found.append(Pinned(pod.namespace, pod.name, container.name, frozenset(container.cpu_ids),
                                    frozenset(mems)))
    return found


def pod_cgroups(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], PodCgroups]:
    """{(namespace, name): PodCgroups} from Pod objects as the API lists them; containers without an id yet
    (not created) are left out. Init containers count: a restartable one (a sidecar) may hold CPUs."""
    found = {}
    for pod in pods:
        metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
        if not metadata.get("uid"):
            continue
        ids = {str(c.get("name")): str(c["containerID"])
               for kind in ("initContainerStatuses", "containerStatuses")
               for c in status.get(kind) or [] if c.get("containerID")}
        found[(str(metadata.get("namespace", "")), str(metadata.get("name", "")))] = PodCgroups(str(metadata["uid"]),
                                                                                                ids)
    return found


def judge(pinned: Pinned, real: Cpuset, topology: HostTopology) -> Finding:
    """drift and split of one container (the module docstring says what each means)."""
    drift = real.cpus != pinned.cpus or bool(pinned.mems and real.mems != pinned.mems)
    cells = {topology.cpus[cpu].node for cpu in real.cpus if cpu in topology.cpus}
    return Finding(pinned, real, drift, bool(cells - real.mems))


def cells_in_use(findings: Iterable[Finding], missing: Iterable[Pinned], topology: HostTopology) -> dict[int, int]:
    """CPUs per NUMA node (every node with CPUs, 0 when none is used) in the findings' real cpusets, and in
    the kubelet's assignment for containers with no cgroup yet: a container that starts on its assigned CPUs
    then changes nothing (no second write of the object for one admission)."""
    cpus = frozenset().union(*(f.real.cpus for f in findings), *(p.cpus for p in missing))
    counts = {node.id: 0 for node in topology.nodes if node.cpus}
    for cpu in cpus:
        if cpu in topology.cpus:
            counts[topology.cpus[cpu].node] = counts.get(topology.cpus[cpu].node, 0) + 1
    return counts


def stranded_cpus(allocatable: Allocatable, exclusive: ExclusiveUse) -> int:
    """Free allocatable CPUs of the node minus the most free in one cell (0 with fewer than two cells)."""
    free = [max(0, allocatable.get(node, CPU) - exclusive.get(node, CPU)) for node in allocatable.by_node]
    return sum(free) - max(free, default=0)


def audit(pinned: Iterable[Pinned], real: Mapping[Key, Cpuset], topology: HostTopology, stranded: int) -> Audit:
    """The audit of the pinned containers whose cpusets were read (`real`); the others are not found."""
    findings, missing = [], []
    for container in pinned:
        cpuset = real.get(container.key)
        if cpuset is None:
            missing.append(container)
        else:
            findings.append(judge(container, cpuset, topology))
    return Audit(True, tuple(findings), tuple(missing), cells_in_use(findings, missing, topology), stranded)
