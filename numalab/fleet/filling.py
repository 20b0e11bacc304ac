"""One side of the fleet bench: one scheduler fills the empty fleet with the workload until it is full, and is
measured (numalab.fleet.scale then tears the side's control plane down).

A side's scheduler is the only one running (numalab.fleet.scale stops the others): idle schedulers would
still follow every pod, and a numa-scheduler marks nodes holding other schedulers' pods "foreign" and
resyncs them, load no side should pay for another. The workload (numalab.fleet.workload, its seed the same
for every side) is created in two phases: at `rate` pods a second for `rate_seconds` (at most half the fleet),
then the rest of the estimate and `overshoot` more as a burst, `creators` requests at a time; then more in
`chunk`s until the fleet is full (numalab.fleet.measures.fullness: no pod admitted for `settle` seconds
before and after a nudge that has the scheduler try again the pods it turned away, and a pod offered left
over, Unschedulable or rejected). Measured then: packing, rejections, the
NodeResourceTopology writes and the scheduler's RSS; afterwards, latencies and the burst's throughput from
the bench's own watch (numalab.fleet.watching).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from numalab.fleet import components as c
from numalab.fleet import measures
from numalab.fleet.controlplane import ControlPlane
from numalab.fleet.driver import FleetDriver
from numalab.fleet.errors import FleetError
from numalab.fleet.kube_api import ApiError, KubeFleetApi
from numalab.fleet.measures import SideResult
from numalab.fleet.watching import PodLog, watch_into
from numalab.fleet.workload import WORKLOAD_LABEL, Mix, at_rate, burst, pods_in, workload
from numalab.model.quantity import parse_cpu_millis
from numalab.progress import Progress, Silent

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5
NUDGE_ANNOTATION = "numa-lab/bench-nudge"


@dataclass(frozen=True)
class FillSettings:
    """How a side is filled. Seconds unless said; rate in pods per second; shares of the estimated pods."""

    rate: float = 20.0
    rate_seconds: float = 30.0
    overshoot: float = 0.1
    chunk: float = 0.05
    settle: float = 10.0
    """Quiet before a nudge and after it: longer than a numa-scheduler's resync (5 s), so the views of the nodes
    that turned pods away are taken again from their objects before the pods are tried again."""
    side_timeout: float = 3600.0
    creators: int = 8
    namespace: str = "default"
    """The bare pods' namespace."""
    deployment_namespace: str = "fleet-deployments"
    """The Deployments' (and so their ReplicaSets' and replicas') own namespace. In one namespace with the bare
    pods, kube-controller-manager's ReplicaSet controller matched every bare pod (an orphan to it) against every
    ReplicaSet there, at each pod's creation and each ReplicaSet's sync: at 5,000 nodes (about 69,000 pods) that
    took 75 % of its CPU (a 30 s profile, most in GetPodReplicaSets and FilterPodsByOwner), 0.3-0.4 of a core the
    schedulers had not. The cost grows with the square of the pods."""
    seed: int = 1
    mix: Mix = field(default_factory=Mix)


def scheduler_process(side: str) -> str:
    """The control plane's process that schedules `side` ("default" or a scoring strategy)."""
    return "kube-scheduler" if side == "default" else c.numa_process(side)


def side_prefix(side: str) -> str:
    """The side's names and label value: s-default, s-leastallocated, ..."""
    return f"s-{side.lower()}"


def pod_millicpu(obj: dict[str, Any]) -> list[int]:
    """Each pod's CPU request of a workload object (a Deployment: one per replica)."""
    spec = obj["spec"]["template"]["spec"] if obj.get("kind") == "Deployment" else obj["spec"]
    millis = sum(parse_cpu_millis(ct["resources"]["requests"].get("cpu", 0)) for ct in spec["containers"])
    return [millis] * pods_in(obj)


def estimate_pods(allocatable_millicpu: int, seed: int, mix: Mix) -> int:
    """Pods of the workload stream asking for the fleet's allocatable CPU (the same for every side)."""
    stream = workload("estimate", seed, mix)
    return measures.pods_to_fill(allocatable_millicpu, itertools.chain.from_iterable(map(pod_millicpu, stream)))


@contextmanager
def creators(workers: int) -> Iterator[ThreadPoolExecutor]:
    """The pool that creates a side's objects. On an exception (Ctrl-C, SIGTERM, a failure) the creations not yet
    started are dropped: a plain pool's exit would first create every one queued, which in a 5,000-node burst (69,114
    pods) kept an interrupted run and its control plane busy for a quarter of an hour."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="fleet-create")
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class _Sampler:
    """The peak and last RSS of one pid, sampled every second in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.last = pid, None, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            rss = measures.rss_bytes(self.pid)
            if rss is not None:
                self.last, self.peak = rss, max(rss, self.peak or 0)
            if self._stop.wait(1.0):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Side:
    """Fill and measure one side; `run()` once. `at_full(side)`, when given, is called once the fleet is measured
    full (a test looks at the published objects then)."""

    def __init__(self, plane: ControlPlane, driver: FleetDriver, api: KubeFleetApi, watch_api: KubeFleetApi,
                 side: str, settings: FillSettings, progress: Progress | None = None,
                 at_full: Callable[[Side], None] | None = None) -> None:
        self.plane, self.driver, self.api, self.watch_api = plane, driver, api, watch_api
        self.at_full = at_full
        self.side, self.settings = side, settings
        self.progress = progress or Silent()
        self.scheduler = plane.scheduler_names[side]
        self.prefix = side_prefix(side)
        self.selector = f"{WORKLOAD_LABEL}={self.prefix}"
        self.log = PodLog()
        self.offered = self.create_errors = self.nudges = 0
        self.replicas: dict[str, int] = {}
        """The Deployments offered, by name (their pods' `app` label), and their replicas."""
        self.refused: set[str] = set()
        """Objects whose creation the API refused (counted in create_errors): nothing owes their pods."""
        self.last_created = 0.0
        self._stream: Iterator[dict[str, Any]] = workload(self.scheduler, settings.seed, settings.mix,
                                                          settings.namespace, self.prefix,
                                                          settings.deployment_namespace)

    def run(self) -> SideResult:
        process = scheduler_process(self.side)
        with self.progress.step(f"{self.side}: {process} started"):
            self.plane.start_process(process)
        sampler = _Sampler(self.plane.pids[process])
        stop, ready = threading.Event(), threading.Event()
        for namespace in {self.settings.namespace, self.settings.deployment_namespace} - {"default"}:
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        watcher = threading.Thread(target=watch_into, args=(self.log, self.watch_api, None, self.selector, stop,
                                                            ready), daemon=True)
        watcher.start()
        try:
            if not ready.wait(60):
                raise FleetError(f"{self.side}: the bench's watch of its pods did not start within 60 s")
            result = self._fill_and_measure(sampler)
        finally:  # (a failure or Ctrl-C leaves the rest to the control plane's teardown)
            stop.set()
            while watcher.is_alive():
                self.watch_api.interrupt()
                watcher.join(0.2)
            sampler.stop()
        self.plane.stop_process(process)
        return result

    def _fill_and_measure(self, sampler: _Sampler) -> SideResult:
        s = self.settings
        allocatable = sum(k.allocatable_millicpu for k in self.driver.kubelets.values())
        estimate = estimate_pods(allocatable, s.seed, s.mix)
        metrics = self.plane.metrics_text()
        writes_before = measures.nrt_writes(metrics)
        reads_before = measures.nrt_writes(metrics, measures.READ_VERBS)
        start = time.monotonic()
        with creators(s.creators) as pool:
            rate_pods = min(estimate // 2, int(s.rate * s.rate_seconds))
            with self.progress.step(f"{self.side}: {rate_pods} pods at {s.rate:g}/s (the fleet takes about "
                                    f"{estimate})"):
                self._offer_at_rate(pool, rate_pods, start)
            burst_start = time.monotonic()
            pods = max(0, estimate - self.offered) + int(estimate * s.overshoot)
            with self.progress.step(f"{self.side}: a burst of {pods} pods"):
                self._offer(pool, burst(self._stream, pods))
            with self.progress.step(f"{self.side}: until the fleet is full"):
                full = self._until_full(pool, start, estimate)
        result = self._measure(full, start, burst_start, (writes_before, reads_before), sampler)
        if self.at_full is not None:
            self.at_full(self)
        return result

    def _until_full(self, pool: ThreadPoolExecutor, start: float, estimate: int) -> bool:
        """Nudge, offer more, or stop, as measures.fullness says; False when the side timed out first."""
        s, last_nudge = self.settings, start
        while time.monotonic() - start < s.side_timeout:
            left_over = self.log.unschedulable() + self.driver.counts.rejected(self.scheduler)
            state = measures.fullness(time.monotonic(), self._last_activity(start), last_nudge, s.settle,
                                      left_over=left_over, owed=self.owed())
            if state == measures.FULL:
                return True
            if state == measures.NUDGE:
                last_nudge = time.monotonic()
                self.nudge()
            elif state == measures.MORE:
                objects = burst(self._stream, max(20, int(estimate * s.chunk)))
                self.progress.note(f"{self.side}: every pod placed and the fleet quiet: "
                                   f"{sum(map(pods_in, objects))} more")
                self._offer(pool, objects)
            time.sleep(POLL_SECONDS)
        return False

    def nudge(self) -> None:
        """An event that makes the scheduler try the pods it turned away again: one annotation set on one
        NodeResourceTopology object (the NUMA-aware plugin asks for every pod it turned away on any update of
        one; kube-scheduler ignores the objects, and its own view is never stale)."""
        self.nudges += 1
        name = next(iter(self.driver.kubelets))
        try:
            self.api.annotate_nrt(name, NUDGE_ANNOTATION, f"{self.side}-{self.nudges}")
        except ApiError as exc:
            log.warning("nudging the scheduler through %s: %s", name, exc)

    def owed(self) -> int:
        """Replicas of the Deployments offered that no pod was seen for yet (their ReplicaSets still owe them)."""
        made = self.log.made()
        return sum(max(0, replicas - made[name]) for name, replicas in self.replicas.items()
                   if name not in self.refused)

    def _last_activity(self, start: float) -> float:
        """The later of the last admission of this side's pods and the last creation."""
        return max(self.driver.counts.last_admitted.get(self.scheduler, start), self.last_created)

    def _measure(self, full: bool, start: float, burst_start: float, before: tuple[int, int],
                 sampler: _Sampler) -> SideResult:
        """`before`: the NodeResourceTopology writes and reads counted when the side started."""
        packed = measures.packing(list(self.driver.kubelets.values()))
        metrics = self.plane.metrics_text()
        writes = measures.nrt_writes(metrics) - before[0] - self.nudges
        reads = measures.nrt_writes(metrics, measures.READ_VERBS) - before[1]
        decided = self.driver.counts.snapshot()["decisions"].get(self.scheduler, {})
        quiet_since = self._last_activity(start)
        counts = self.log.counts()
        result = SideResult(
            nodes=len(self.driver.kubelets), side=self.side, scheduler=self.scheduler, full=full,
            offered=self.offered, seen=counts["seen"], bound=counts["bound"], admitted=decided.get("admitted", 0),
            rejected=dict(decided.get("rejected", {})), cannot_judge=sum(decided.get("cannot-judge", {}).values()),
            unbound_at_full=counts["unbound"], fill_seconds=round(quiet_since - start, 2),
            rate_latency=measures.latency_percentiles(self.log.latencies(start, burst_start)),
            burst_latency=measures.latency_percentiles(self.log.latencies(burst_start)),
            throughput=measures.bind_throughput(burst_start, self.log.bind_times(burst_start)),
            packing=packed, nrt_writes=writes, nrt_reads=reads, rss_peak=sampler.peak, rss_full=sampler.last,
            kubelet_lag=measures.latency_percentiles(self.driver.counts.lags.get(self.scheduler, [])),
            create_errors=self.create_errors, relisted=self.log.relisted)
        self.progress.note(f"{self.side}: {'full' if full else 'NOT full (timed out)'} after {result.fill_seconds} s: "
                           f"{result.admitted} admitted, {result.rejections} rejected, {result.unbound_at_full} "
                           f"unbound, {packed.allocated_share:.0%} of CPUs allocated, {packed.stranded_cpus} stranded")
        return result

    def _offer_at_rate(self, pool: ThreadPoolExecutor, pods: int, start: float) -> None:
        offered = self.offered
        for obj in at_rate(self._stream, self.settings.rate):
            if self.offered - offered >= pods or self.log.stuck(time.monotonic(), self.settings.settle):
                return
            if time.monotonic() - start > self.settings.side_timeout:
                return
            pool.submit(self._create, obj)
            self._offered([obj])

    def _offer(self, pool: ThreadPoolExecutor, objects: list[dict[str, Any]]) -> None:
        """Create these objects `creators` at a time; return when all were answered."""
        for future in [pool.submit(self._create, obj) for obj in objects]:
            future.result()
        self._offered(objects)

    def _offered(self, objects: list[dict[str, Any]]) -> None:
        self.offered += sum(map(pods_in, objects))
        self.replicas.update((obj["metadata"]["name"], pods_in(obj)) for obj in objects if obj["kind"] == "Deployment")

    def _create(self, obj: dict[str, Any]) -> None:
        try:
            self.api.create(obj)
        except ApiError as exc:
            self.create_errors += 1
            self.refused.add(obj["metadata"]["name"])
            log.warning("creating %s %s: %s", obj["kind"], obj["metadata"]["name"], exc)
        self.last_created = time.monotonic()
