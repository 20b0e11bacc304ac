"""What the fleet bench measures, as pure functions of what it recorded: no API, no process.

- scheduling throughput: pods bound per second in a burst (`bind_throughput`);
- time from creation to binding, p50 and p99 (`latency_percentiles`, numalab.percentiles' nearest rank);
- packing when the fleet is full: CPUs requested by admitted pods over the Nodes' allocatable, and stranded CPUs
  by numa-align's auditor's definition (`packing`, through SimulatedKubelet.stranded_cpus);
- writes of NodeResourceTopology objects from kube-apiserver's /metrics (`nrt_writes`);
- a process's RSS from /proc/PID/status (`rss_bytes`);
- when a side's fleet is full (`fullness`);
and what one side measured, together (`SideResult`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from numalab.percentiles import percentile

THROUGHPUT_PERCENTILE = 95
"""Throughput counts a burst's binds up to its 95th-percentile bind: the last ones are the pods that fit only
after a retry as the fleet fills, a tail of waits rather than of scheduling work."""
NRT_RESOURCE = "noderesourcetopologies"
WRITE_VERBS = frozenset({"CREATE", "UPDATE", "PATCH"})
"""apiserver_request_total's verbs for POST, PUT and PATCH."""
READ_VERBS = frozenset({"GET", "LIST"})
"""... and for reads (a numa-scheduler reads each node's object it resyncs; WATCH streams are not counted)."""
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def bind_throughput(start: float, bind_times: Iterable[float]) -> float | None:
    """Pods bound per second from `start` (the burst's first creation) to its THROUGHPUT_PERCENTILE bind, counting
    the binds up to it; None without binds."""
    times = sorted(t for t in bind_times if t >= start)
    if not times:
        return None
    last = percentile(times, THROUGHPUT_PERCENTILE)
    counted = sum(1 for t in times if t <= last)
    return counted / max(last - start, 1e-3)


def latency_percentiles(latencies: Sequence[float]) -> tuple[float, float] | None:
    """(p50, p99) of creation-to-binding seconds; None without any."""
    if not latencies:
        return None
    return percentile(latencies, 50), percentile(latencies, 99)


class Packed(Protocol):
    """What `packing` reads of a simulated kubelet (numalab.fleet.kubelet_sim.SimulatedKubelet)."""

    used: dict[str, int]

    @property
    def allocatable_millicpu(self) -> int: ...

    def stranded_cpus(self) -> int: ...


@dataclass(frozen=True)
class Packing:
    """CPUs requested by the admitted pods and the Nodes' allocatable (millicores), stranded CPUs (whole), nodes
    counted, and how many of them strand any."""

    allocated_millicpu: int
    allocatable_millicpu: int
    stranded_cpus: int
    nodes: int
    stranding_nodes: int

    @property
    def allocated_share(self) -> float:
        return self.allocated_millicpu / self.allocatable_millicpu if self.allocatable_millicpu else 0.0


def packing(kubelets: Iterable[Packed]) -> Packing:
    """The fleet's packing now: every node's admitted CPU requests and allocatable, its stranded CPUs summed."""
    allocated = allocatable = stranded = nodes = stranding = 0
    for kubelet in kubelets:
        mine = kubelet.stranded_cpus()
        allocated += kubelet.used.get("cpu", 0)
        allocatable += kubelet.allocatable_millicpu
        stranded += mine
        stranding += mine > 0
        nodes += 1
    return Packing(allocated, allocatable, stranded, nodes, stranding)


def nrt_writes(metrics: str, verbs: frozenset[str] = WRITE_VERBS) -> int:
    """Requests that wrote NodeResourceTopology objects (CREATE, UPDATE, PATCH, any answer code) so far, from
    kube-apiserver's Prometheus text, or those with other `verbs` (READ_VERBS: the numa-schedulers' reads); take
    two readings' difference for a side."""
    total = 0.0
    for line in metrics.splitlines():
        sample = _SAMPLE.match(line)
        if not sample:
            continue
        labels = dict(_LABEL.findall(sample.group("labels")))
        if labels.get("resource") == NRT_RESOURCE and labels.get("verb") in verbs:
            total += float(sample.group("value"))
    return int(total)


def rss_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """VmRSS of `pid` from /proc/PID/status in bytes; None when the process is gone (or a kernel thread)."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            return int(value) * {"kB": 1024, "mB": 1024**2}.get(unit, 1)
    return None


FILLING, NUDGE, FULL, MORE = "filling", "nudge", "full", "more"


def fullness(now: float, last_activity: float, last_nudge: float, settle: float, *, left_over: int,
             owed: int = 0) -> str:
    """Whether a side's fleet is full, by the bench's definition, and what to do next:

    FILLING while the ReplicaSets owe pods (`owed`: replicas of the Deployments offered that no pod was seen
    for yet): under a burst of 5,000 nodes' pods the controller-manager fell minutes behind (a ReplicaSet also
    waits until its informer has seen the pods it made before it makes more), and the default side was once
    called full, 20 s without a pod made or admitted, with 1,707 replicas not made;
    FILLING while a pod was admitted or created within the last `settle` seconds (`last_activity`: the later of
    the two);
    NUDGE once quiet, unless nudged since the last activity: wake the pods the scheduler turned away, so each is
    tried again on the nodes' views as resynced meanwhile (a pod turned away on a numa-scheduler's stale view
    would otherwise wait for its queue's next leftover flush, up to 30 s + UNSCHEDULABLE_RETRY);
    FILLING again for `settle` seconds after the nudge;
    then FULL if a pod offered could not be placed (`left_over`: left unbound and Unschedulable, or bound and
    rejected by its kubelet), else MORE (every pod offered was placed: offer more). Every side is offered the
    same pods until one is left over; the default scheduler's are mostly rejected ones, a NUMA-aware one's
    Unschedulable ones."""
    if owed > 0 or now - last_activity < settle:
        return FILLING
    if last_nudge < last_activity:
        return NUDGE
    if now - last_nudge < settle:
        return FILLING
    return FULL if left_over > 0 else MORE


def pods_to_fill(allocatable_millicpu: int, pod_millicpu: Iterable[int], sample: int = 20_000) -> int:
    """How many pods of the stream `pod_millicpu` (each pod's CPU request) ask for the fleet's allocatable CPU:
    the bench's estimate of where the fleet is full (memory, cells and rejections decide the rest). Past `sample`
    pods, the rest is extrapolated from their mean."""
    asked = pods = 0
    for millis in pod_millicpu:
        if asked >= allocatable_millicpu:
            return pods
        if pods == sample:  # (a stream asking for no CPU never fills a fleet: the sample is the answer)
            return math.ceil(pods * allocatable_millicpu / asked) if asked else pods
        asked += millis
        pods += 1
    return pods


@dataclass
class SideResult:
    """What one side measured (times in seconds, memory in bytes); `full` False: the side timed out first."""

    nodes: int
    side: str
    scheduler: str
    full: bool
    offered: int
    seen: int
    bound: int
    admitted: int
    rejected: dict[str, int]
    cannot_judge: int
    unbound_at_full: int
    fill_seconds: float
    rate_latency: tuple[float, float] | None
    burst_latency: tuple[float, float] | None
    throughput: float | None
    packing: Packing
    nrt_writes: int
    rss_peak: int | None
    rss_full: int | None
    nrt_reads: int = 0
    kubelet_lag: tuple[float, float] | None = None
    """p50 and p99 seconds from a bound pod's event reaching the simulated kubelets to its object and status
    written: the window in which a numa-scheduler that resyncs the node forgets the pod (numalab.fleet.driver)."""
    create_errors: int = 0
    relisted: int = 0

    @property
    def rejections(self) -> int:
        return sum(self.rejected.values())

    @property
    def nrt_writes_per_second(self) -> float:
        return self.nrt_writes / self.fill_seconds if self.fill_seconds > 0 else 0.0
