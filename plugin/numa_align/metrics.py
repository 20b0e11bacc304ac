"""Prometheus metrics of the plugin, on a registry of its own so several plugins can share a process
(tests run many).

The per-node `numa_align_node_*` gauges (what the kubelet may hand out and what pinned pods hold on each
NUMA node) come from the PodResources poll of `publishing.NrtPublisher`, which runs whenever metrics are
served, NRT publishing on or off. `numa_align_kubelet_checkpoint_set_aside` comes from the kubelet guard's
record (guard_report.py), read by the same poll when it changes. The audit's gauges (`set_audit`) come from
the same poll too (auditing.py): while the cgroup tree cannot be read `numa_align_audit_readable` is 0 and
the counts are NaN (unknown), not 0. `numa_align_nrt_update_latency_seconds` has one value per write of the NRT
object: from the kubelet's checkpoint change seen (or the poll's start, without one) to the end of the poll that
wrote it (its Lease renewal included: an upper bound; bench/nrt_freshness_bench.py times the write itself)."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from numa_align.audit import Audit
from numa_align.devices import HEALTHY, UNHEALTHY
from numa_align.nrt import CPU, MEMORY, Allocatable, ExclusiveUse

log = logging.getLogger(__name__)


READY_PATH = "/readyz"
"""200 once every resource is registered with the kubelet, 503 (naming those that are not) before: the
DaemonSet's readiness probe, so a rolling update waits for the kubelet to know the new pod."""


LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds: the goal is 2 (issue 27); the field's exporters refresh every 60."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """No line per request: the kubelet's probe and Prometheus' scrape would fill the journal."""


def _with_readiness(metrics_app: Callable, ready: Callable[[], tuple[bool, str]]) -> Callable:
    def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != READY_PATH:
            return metrics_app(environ, start_response)
        ok, why = ready()
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [(why + "\n").encode()]
    return app


class Metrics:
    """The plugin's gauges and counters; `serve(host, port)` exposes them at /metrics, and READY_PATH."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.node_cpus = Gauge("numa_node_cpus_count", "CPUs of the NUMA node", ["node"], registry=r)
        self.node_memory = Gauge("numa_node_memory_bytes", "MemTotal of the NUMA node", ["node"], registry=r)
        self.node_memory_only = Gauge(
            "numa_node_memory_only", "1 for a node without online CPUs (never advertised)", ["node"], registry=r
        )
        self.devices = Gauge("numa_align_devices", "Devices advertised", ["resource", "health"], registry=r)
        self.registered = Gauge(
            "numa_align_registered", "1 while the resource is registered with the kubelet", ["resource"], registry=r
        )
        self.registrations = Counter(
            "numa_align_registrations", "Successful Register calls to the kubelet", registry=r
        )
        self.allocations = Counter(
            "numa_align_allocations", "Containers given devices by Allocate", ["resource"], registry=r
        )
        self.allocate_errors = Counter(
            "numa_align_allocate_errors", "Allocate calls rejected (unknown or foreign device ids)", registry=r
        )
        self.cpus_allocatable = Gauge(
            "numa_align_node_cpus_allocatable", "CPUs of the NUMA node the kubelet may pin (PodResources)",
            ["node"], registry=r)
        self.cpus_allocated = Gauge(
            "numa_align_node_cpus_allocated", "CPUs of the NUMA node pinned to containers (exclusive)",
            ["node"], registry=r)
        self.memory_allocatable = Gauge(
            "numa_align_node_memory_allocatable_bytes", "Memory of the NUMA node the kubelet may place (PodResources)",
            ["node"], registry=r)
        self.memory_allocated = Gauge(
            "numa_align_node_memory_allocated_bytes",
            "Memory placed on the NUMA node by the Memory Manager (a block over several nodes counts on each)",
            ["node"], registry=r)
        self.pods_pinned = Gauge(
            "numa_align_node_pods_pinned",
            "Pods with exclusive CPUs, NUMA-placed memory or numa-align devices on the NUMA node", ["node"], registry=r)
        self.checkpoint_set_aside = Gauge(
            "numa_align_kubelet_checkpoint_set_aside",
            "1: numa-lab's kubelet guard moved this checkpoint aside at this boot (the hardware changed; the "
            "kubelet would have refused it)", ["file"], registry=r)
        self.audit_readable = Gauge(
            "numa_align_audit_readable",
            "1: the cpusets of the pinned containers were read from the cgroup tree; 0: unknown (see the log)",
            registry=r)
        self.containers_split = Gauge(
            "numa_align_containers_split",
            "Containers with exclusive CPUs on a NUMA node their cpuset.mems excludes (CPUs and memory in "
            "different cells); NaN: unknown", registry=r)
        self.containers_drift = Gauge(
            "numa_align_containers_cpuset_drift",
            "Containers whose real cpuset (cgroup) is not what the kubelet assigned (PodResources); NaN: unknown",
            registry=r)
        self.containers_audited = Gauge(
            "numa_align_audit_containers",
            "Containers with exclusive CPUs: audited (cgroup read) or not_found (no cgroup yet: starting, restarted)",
            ["result"], registry=r)
        self.container_problem = Gauge(
            "numa_align_container_cpuset_problem", "1 for each split or drifted container (only those)",
            ["namespace", "pod", "container", "problem"], registry=r)
        self.cpus_in_cpusets = Gauge(
            "numa_align_node_cpus_exclusive_in_cpusets",
            "CPUs of the NUMA node in the real cpusets of containers with exclusive CPUs (the kubelet's view: "
            "numa_align_node_cpus_allocated)", ["node"], registry=r)
        self.stranded_cpus = Gauge(
            "numa_align_stranded_cpus",
            "Free allocatable CPUs of this host minus the most free in one NUMA node: what no single-cell pod can get",
            registry=r)
        self.nrt_update_latency = Histogram(
            "numa_align_nrt_update_latency_seconds",
            "Seconds from a kubelet checkpoint change seen (or the poll's start without one) to the end of the "
            "poll that wrote the NodeResourceTopology object with it", buckets=LATENCY_BUCKETS, registry=r)
        self._cells: set[int] = set()
        self._problems: set[tuple[str, str, str, str]] = set()
        self._audit_cells: set[int] = set()
        self._registered: dict[str, bool] = {}
        self._server: WSGIServer | None = None

    def set_node(self, node: int, cpus: int, memory: int, memory_only: bool = False) -> None:
        self.node_cpus.labels(node=str(node)).set(cpus)
        self.node_memory.labels(node=str(node)).set(memory)
        self.node_memory_only.labels(node=str(node)).set(1 if memory_only else 0)

    def set_cells(self, allocatable: Allocatable, exclusive: ExclusiveUse, pinned: dict[int, int]) -> None:
        """The per-node gauges for the nodes in `pinned` (every online node); nodes gone since lose theirs."""
        gauges = (self.cpus_allocatable, self.cpus_allocated, self.memory_allocatable, self.memory_allocated,
                  self.pods_pinned)
        for node in self._cells - pinned.keys():
            for gauge in gauges:
                gauge.remove(str(node))
        for node, pods in pinned.items():
            label = str(node)
            self.cpus_allocatable.labels(node=label).set(allocatable.get(node, CPU))
            self.cpus_allocated.labels(node=label).set(exclusive.get(node, CPU))
            self.memory_allocatable.labels(node=label).set(allocatable.get(node, MEMORY))
            self.memory_allocated.labels(node=label).set(exclusive.get(node, MEMORY))
            self.pods_pinned.labels(node=label).set(pods)
        self._cells = set(pinned)

    def set_audit(self, audit: Audit) -> None:
        """The audit's gauges; the per-container series only for offending containers, removed when they are not."""
        self.stranded_cpus.set(audit.stranded)
        self.audit_readable.set(1 if audit.readable else 0)
        unknown = float("nan")
        self.containers_split.set(len(audit.split) if audit.readable else unknown)
        self.containers_drift.set(len(audit.drift) if audit.readable else unknown)
        self.containers_audited.labels(result="audited").set(len(audit.findings) if audit.readable else unknown)
        self.containers_audited.labels(result="not_found").set(len(audit.not_found) if audit.readable else unknown)
        problems = {(f.pinned.namespace, f.pinned.pod, f.pinned.container, problem)
                    for f in audit.findings for problem, bad in (("split", f.split), ("drift", f.drift)) if bad}
        for labels in self._problems - problems:
            self.container_problem.remove(*labels)
        for labels in problems:
            self.container_problem.labels(*labels).set(1)
        self._problems = problems
        cells = audit.cells if audit.readable else {}
        for node in self._audit_cells - cells.keys():
            self.cpus_in_cpusets.remove(str(node))
        for node, cpus in cells.items():
            self.cpus_in_cpusets.labels(node=str(node)).set(cpus)
        self._audit_cells = set(cells)

    def set_checkpoints_set_aside(self, files: Iterable[str]) -> None:
        """From the guard's record of this boot (numa_align.guard_report), each time it changes."""
        for file in files:
            self.checkpoint_set_aside.labels(file=file).set(1)

    def set_devices(self, resource: str, count: int, healthy: bool) -> None:
        self.devices.labels(resource=resource, health=HEALTHY).set(count if healthy else 0)
        self.devices.labels(resource=resource, health=UNHEALTHY).set(0 if healthy else count)

    def set_registered(self, resource: str, registered: bool) -> None:
        self.registered.labels(resource=resource).set(1 if registered else 0)
        self._registered[resource] = registered

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): ready once every resource the plugin serves is registered with the kubelet."""
        waiting = sorted(resource for resource, done in self._registered.items() if not done)
        if not self._registered:
            return False, "no resource registered with the kubelet yet"
        if waiting:
            return False, "not registered with the kubelet: " + ", ".join(waiting)
        return True, "registered with the kubelet: " + ", ".join(sorted(self._registered))

    def serve(self, host: str, port: int) -> tuple[str, int]:
        """Start the /metrics (and READY_PATH) HTTP server in a daemon thread; return the address it listens on."""
        family = socket.getaddrinfo(host or "0.0.0.0", port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("Server", (_Server,), {"address_family": family})
        app = _with_readiness(make_wsgi_app(self.registry), self.readiness)
        server = make_server(host or "0.0.0.0", port, app, server_class, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        self._server = server
        bound = server.server_address
        log.info("metrics at http://%s:%d/metrics", bound[0], bound[1])
        return bound[0], bound[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
