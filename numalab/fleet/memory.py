"""How much memory a simulated fleet needs, estimated before anything starts, and the refusal when it does not fit.

The estimate is a line through RSS measured here (see estimate_memory) for the control plane's processes
together: etcd, kube-apiserver, controller-manager, kube-scheduler, numa-schedulers and kwok. It leaves out
the bench's own Python process and the simulated kubelet, which the caller sizes itself.
"""

from __future__ import annotations

from pathlib import Path

from numalab.fleet.errors import FleetError

MEMINFO = Path("/proc/meminfo")
KiB, MiB = 1024, 1024 * 1024

# The processes other than schedulers (etcd, kube-apiserver, kube-controller-manager, kwok) together ...
OTHERS_BASE = 430 * MiB
OTHERS_PER_NODE = 258 * KiB  # the apiserver's watch cache of Nodes, Leases and NRT objects most of it
OTHERS_PER_POD = 81 * KiB  # the apiserver's 70 KiB of it
# ... and each scheduler (kube-scheduler, or a numa-scheduler: each caches every node and pod itself).
SCHEDULER_BASE = 67 * MiB
SCHEDULER_PER_NODE = 40 * KiB
SCHEDULER_PER_POD = 9 * KiB
SCHEDULERS = 5  # kube-scheduler and one numa-scheduler per scoring strategy
HEADROOM = 0.8  # of MemAvailable: the page cache and the rest of the machine keep the other fifth


def estimate_memory(nodes: int, pods: int, schedulers: int = SCHEDULERS) -> int:
    """Bytes of RSS the control plane will need for `nodes` kwok nodes, `pods` pods and `schedulers` schedulers.

    A line through RSS (VmRSS, MiB) measured here on 2026-11-27 (2 cores, 24 GiB, the KVM lab running beside it,
    everything under nice 19), with all five schedulers; each node had a 2-zone NodeResourceTopology object,
    each pod 1 CPU and 1 GiB and was bound to a node by nodeName (no pod status: no kubelet wrote one):

        stage                  etcd  apiserver  ctrl-mgr  kube-sched  numa-sched (each)  kwok  total
        idle                     43        260        72          61                 67    54    757
        100 nodes                48        285        72          64                 71    62    816
        100 nodes, 1,000 pods    57        334        78          69                 81    64    926
        1,000 nodes, 1,000 pods  84        512        78          89                117    86  1,318
        1,000 nodes, 10,000 pods 131      1,125       128         154                193    89  2,399

    The line gives 932 MiB and 2,442 MiB for the last two sizes (9,153 MiB for 5,000 nodes and 50,000 pods, an
    extrapolation). Pods a simulated kubelet gives a status are a little larger than these; HEADROOM is the margin
    for that and for Go's garbage collector, whose RSS follows the live heap with a lag.
    """
    if nodes < 0 or pods < 0 or schedulers < 0:
        raise FleetError(f"a fleet of {nodes} nodes, {pods} pods and {schedulers} schedulers: each must be 0 or more")
    others = OTHERS_BASE + nodes * OTHERS_PER_NODE + pods * OTHERS_PER_POD
    return others + schedulers * (SCHEDULER_BASE + nodes * SCHEDULER_PER_NODE + pods * SCHEDULER_PER_POD)


def mem_available(meminfo: Path = MEMINFO) -> int:
    """MemAvailable from /proc/meminfo, in bytes."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError) as exc:
        raise FleetError(f"cannot read MemAvailable from {meminfo}: {exc}") from None
    raise FleetError(f"{meminfo} has no MemAvailable line (Linux 3.14 or newer has it)")


def check_memory(nodes: int, pods: int, meminfo: Path = MEMINFO, schedulers: int = SCHEDULERS) -> int:
    """The estimate for this scale; FleetError with both figures when it exceeds HEADROOM of MemAvailable."""
    needed = estimate_memory(nodes, pods, schedulers)
    available = mem_available(meminfo)
    if needed > available * HEADROOM:
        raise FleetError(
            f"{nodes} nodes and {pods} pods need about {needed / MiB:,.0f} MiB for the control plane, more than "
            f"{HEADROOM:.0%} of MemAvailable {available / MiB:,.0f} MiB on this machine; simulate fewer nodes or pods"
        )
    return needed
