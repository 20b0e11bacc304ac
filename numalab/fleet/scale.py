"""The fleet-scale bench (`make scale`, bench/fleet_scale.py): for each size, each side in turn (the default
kube-scheduler, then a numa-scheduler per scoring strategy) on a control plane and fleet of kwok nodes of its
own, filled until full (numalab.fleet.filling), then torn down.

A plane per side, not one per size emptied between sides: registering 1,000 nodes took seconds where deleting a
full fleet's 13,000 pods took 160-220 s (and five times the pods at 5,000 nodes), and no side starts on an etcd
the previous one left full of deletions. Only the side's scheduler runs while it is measured: the plane starts
its schedulers (each checked ready), the bench stops them and Side starts the side's own once the fleet is
Ready. `run_side` returns one side's result; numalab.fleet.cli writes each as it comes.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from numalab.fleet import components as c
from numalab.fleet.binaries import FleetBinaries
from numalab.fleet.controlplane import ControlPlane, port_names
from numalab.fleet.driver import FleetDriver
from numalab.fleet.errors import FleetError
from numalab.fleet.filling import FillSettings, Side, estimate_pods
from numalab.fleet.kube_api import KubeFleetApi, api_client
from numalab.fleet.kubelet_sim import Decision, SimulatedKubelet
from numalab.fleet.measures import SideResult
from numalab.fleet.memory import check_memory
from numalab.fleet.nodes import node_resources
from numalab.fleet.processes import log_tail
from numalab.fleet.spec import DEFAULT_FLEET, FleetSpec, expand, fleet_spec, shares
from numalab.model.numa_scheduler import SCORING_STRATEGIES
from numalab.model.quantity import parse_cpu_millis
from numalab.progress import Progress, Silent

PODS_MARGIN = 1.2
"""Pods the memory estimate is asked for, over the pods the fleet takes: the burst's overshoot and the pods left
Pending; and up to TERMINATED_KEPT more, the Failed pods the default side's kubelets reject (Deployment replicas
among them are made again by their ReplicaSets) until the terminated-pod collector deletes the oldest."""
TERMINATED_KEPT = 12_500  # kube-controller-manager's --terminated-pod-gc-threshold, upstream's default
READY_TIMEOUT = 600.0
DRIVER_WORKERS = 32
"""The simulated kubelets' threads, each writing its nodes' objects and statuses one request at a time: at 100
nodes beside the lab, 8 of them left a bound pod 4.1 s (p99) before its object showed it, 32 of them 1.1 s, 64
no better (1.1 s). That lag is the window in which a numa-scheduler resyncing the node forgets the pod."""


@dataclass(frozen=True)
class ScaleSettings:
    """One bench run: sizes (nodes), the numa-scheduler strategies (the default scheduler runs first unless left out),
    the fleet's shapes (its `nodes` replaced by each size), how each side is filled, fixed ports, where the
    control plane's directory goes, and the numa-schedulers' klog -v and cache resync period."""

    sizes: tuple[int, ...] = (100, 1000, 5000)
    strategies: tuple[str, ...] = SCORING_STRATEGIES
    fleet: FleetSpec = field(default_factory=lambda: fleet_spec(DEFAULT_FLEET))
    fill: FillSettings = field(default_factory=FillSettings)
    ports: dict[str, int] = field(default_factory=dict)
    workdir: Path = Path(tempfile.gettempdir())
    verbosity: int = c.VERBOSITY
    resync_seconds: int | None = None
    """The numa-schedulers' cache resync period; None: the lab's (5 s)."""
    default_side: bool = True
    """False: the default scheduler's side is left to another sitting (a 5,000-node NUMA-aware side takes about
    two hours here, and it alone fits one)."""

    @property
    def sides(self) -> tuple[str, ...]:
        return ("default", *self.strategies) if self.default_side else self.strategies


def spec_for(spec: FleetSpec, nodes: int) -> FleetSpec:
    """The spec with `nodes` nodes; FleetError when its exact counts do not fit that size."""
    counted = sum(entry.count or 0 for entry in spec.entries)
    if counted > nodes or (counted < nodes and not any(entry.weight for entry in spec.entries)):
        raise FleetError(f"a fleet of {nodes} nodes: the spec's shape counts add up to {counted}"
                         f"{'' if any(e.weight for e in spec.entries) else ' and no shape has a weight'}")
    return replace(spec, nodes=nodes)


def fleet_pods(spec: FleetSpec, fill: FillSettings) -> int:
    """About how many pods the fleet takes (estimate_pods over its Nodes' allocatable CPU)."""
    allocatable = sum(count * parse_cpu_millis(node_resources(entry.shape)[1]["cpu"])
                      for entry, count in zip(spec.entries, shares(spec), strict=True))
    return estimate_pods(allocatable, fill.seed, fill.mix)


def memory_pods(spec: FleetSpec, fill: FillSettings) -> int:
    """The pods the memory estimate is asked for (PODS_MARGIN, TERMINATED_KEPT)."""
    pods = fleet_pods(spec, fill)
    return int(pods * PODS_MARGIN) + min(TERMINATED_KEPT, pods)


def check_sizes(settings: ScaleSettings) -> None:
    """Every size's fleet spec and memory estimate (one scheduler holding the pods: the side's), before the first
    process starts; FleetError for the first that does not fit."""
    for size in settings.sizes:
        check_memory(size, memory_pods(spec_for(settings.fleet, size), settings.fill), schedulers=1)


def run_size(size: int, binaries: FleetBinaries, settings: ScaleSettings, progress: Progress | None = None,
             at_full: Callable[[Side], None] | None = None,
             on_decision: Callable[[SimulatedKubelet, Mapping[str, Any], Decision], None] | None = None,
             ) -> list[SideResult]:
    """Every side of `size` nodes in turn (run_side); their results."""
    return [run_side(size, side, binaries, settings, progress, at_full, on_decision) for side in settings.sides]


def run_side(size: int, side: str, binaries: FleetBinaries, settings: ScaleSettings,
             progress: Progress | None = None, at_full: Callable[[Side], None] | None = None,
             on_decision: Callable[[SimulatedKubelet, Mapping[str, Any], Decision], None] | None = None,
             ) -> SideResult:
    """One control plane of `size` nodes with `side`'s scheduler, filled once; its result. `at_full`
    (filling.Side) and `on_decision` (driver.FleetDriver) let a test look on."""
    progress = progress or Silent()
    spec = spec_for(settings.fleet, size)
    fleet = expand(spec)
    strategies = () if side == "default" else (side,)
    ports = {name: port for name, port in settings.ports.items() if name in port_names(strategies)}
    plane = ControlPlane(settings.workdir, binaries, strategies, ports=ports, nodes=size,
                         pods=memory_pods(spec, settings.fill), schedulers=1, verbosity=settings.verbosity,
                         resync_seconds=settings.resync_seconds, progress=progress)
    with plane:
        for process in ("kube-scheduler", *map(c.numa_process, strategies)):
            plane.stop_process(process)
        client = api_client(plane.kubeconfig, DRIVER_WORKERS + settings.fill.creators + 4)
        driver = FleetDriver(KubeFleetApi(client), fleet, workers=DRIVER_WORKERS, on_decision=on_decision)
        with progress.step(f"{size} nodes for {side}: Nodes and NodeResourceTopology objects registered"):
            driver.register()
        stop, ready = threading.Event(), threading.Event()
        thread = threading.Thread(target=driver.run, args=(stop, ready), name="fleet-driver", daemon=True)
        thread.start()
        try:
            if not ready.wait(60):
                raise FleetError("the simulated kubelets' watch of bound pods did not start within 60 s")
            api = KubeFleetApi(client)
            with progress.step(f"{size} nodes Ready (kwok)"):
                wait_ready(api, size, plane.logs["kwok"])
            return Side(plane, driver, api, KubeFleetApi(client), side, settings.fill, progress, at_full).run()
        finally:
            stop.set()
            thread.join(30)


def wait_ready(api: KubeFleetApi, nodes: int, kwok_log: Path, timeout: float = READY_TIMEOUT) -> None:
    """Until kwok has made every fleet Node Ready."""
    deadline = time.monotonic() + timeout
    while True:
        ready = api.ready_nodes()
        if ready >= nodes:
            return
        if time.monotonic() > deadline:
            raise FleetError(f"only {ready} of {nodes} kwok nodes Ready after {timeout:.0f} s; last lines of "
                             f"kwok's log: {log_tail(kwok_log)}")
        time.sleep(2.0)
