"""A native Kubernetes control plane on loopback for the fleet-scale simulation (issue 28), as a context manager.

    with ControlPlane(Path("/tmp"), fleet_binaries(), ["MostAllocated"], nodes=1000, pods=20000) as plane:
        plane.kubeconfig, plane.api_url, plane.pids, plane.scheduler_names, plane.metrics_text("kube-apiserver")

Everything is checked before the first process starts (strategies, binaries, ports, memory), so bad input is
one line and nothing runs. Then, in a fresh temporary directory under `workdir`: the PKI, etcd, kube-apiserver,
the NodeResourceTopology CRD and the numa-scheduler's rights (the lab's own), then controller-manager, the
schedulers and kwok together, each waited for on its health path (numalab.fleet.components says what each
runs with). Leaving the block, by its end, an exception or Ctrl-C, and any failure while starting, stops every
process (numalab.fleet.processes) and removes the directory unless `keep`.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import yaml
from numa_align.nrt_api import CRD_NAME

from numalab.fleet import components as c
from numalab.fleet import processes
from numalab.fleet.binaries import FleetBinaries
from numalab.fleet.credentials import Credentials, make_credentials
from numalab.fleet.errors import FleetError
from numalab.fleet.memory import MEMINFO, check_memory
from numalab.fleet.others import PLANE_PREFIX
from numalab.fleet.ports import assign_ports
from numalab.model.numa_scheduler import SCORING_STRATEGIES
from numalab.pki import PkiError
from numalab.progress import Progress, Silent

READY_TIMEOUT_SECONDS = 120.0
CRD_TIMEOUT_SECONDS = 60.0
DEFAULT_SCHEDULER = "default-scheduler"
# process -> (health path, scheme); every other process is a numa-scheduler (/readyz, https)
HEALTH = {"etcd": ("/health", "http"), "kube-apiserver": ("/readyz", "https"),
          "kube-controller-manager": ("/healthz", "https"), "kube-scheduler": ("/readyz", "https"),
          "kwok": ("/healthz", "https")}


def port_names(strategies: Sequence[str]) -> list[str]:
    """What listens on a port of its own, by the names `ports` takes (process names, and etcd-peer)."""
    return ["etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
            *(c.numa_process(s) for s in strategies), "kwok"]


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a numa-scheduler per strategy and kwok.

    `ports` fixes some (process name, or "etcd-peer", -> port); the rest are picked free. `nodes` and `pods`
    are the scale about to be simulated: refused up front when memory.estimate_memory exceeds what the
    machine has available, for `schedulers` holding them at once (all of them unless told: a bench that runs one
    at a time says 1). `verbosity` is the numa-schedulers' klog -v (components.VERBOSITY says why 0),
    `resync_seconds` their cache's resync period when not the lab's. `controllers` are the controller-manager's
    (components.CONTROLLERS by default).
    """

    def __init__(
        self,
        workdir: Path,
        binaries: FleetBinaries,
        strategies: Sequence[str] = SCORING_STRATEGIES,
        *,
        ports: Mapping[str, int] | None = None,
        nodes: int = 0,
        pods: int = 0,
        schedulers: int | None = None,
        verbosity: int = c.VERBOSITY,
        resync_seconds: int | None = None,
        controllers: Sequence[str] = c.CONTROLLERS,
        node_lease_seconds: int = c.NODE_LEASE_SECONDS,
        ready_timeout: float = READY_TIMEOUT_SECONDS,
        stop_grace: float = processes.STOP_GRACE_SECONDS,
        keep: bool = False,
        progress: Progress | None = None,
        meminfo: Path = MEMINFO,
    ) -> None:
        self.workdir = Path(workdir)
        self.binaries = binaries
        self.strategies = tuple(strategies)
        self.fixed_ports = dict(ports or {})
        self.nodes, self.pods = nodes, pods
        self.schedulers = 1 + len(self.strategies) if schedulers is None else schedulers
        self.verbosity, self.resync_seconds = verbosity, resync_seconds
        self.controllers = tuple(controllers)
        self.node_lease_seconds = node_lease_seconds
        self.ready_timeout = ready_timeout
        self.stop_grace = stop_grace
        self.keep = keep
        self.progress = progress or Silent()
        self.meminfo = meminfo
        self.directory: Path | None = None
        self.ports: dict[str, int] = {}
        self.processes: list[processes.Process] = []
        self._batches: list[list[processes.Process]] = []  # in start order; stopped in reverse
        self._commands: dict[str, list[str]] = {}  # process name -> its command line, to start it again
        self._layout: c.Layout | None = None
        self.credentials: Credentials | None = None
        self.startup_seconds: float | None = None
        self._context: ssl.SSLContext | None = None

    # What a caller reads once the block is entered.
    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (system:masters) for this run's API server."""
        return self._credentials().admin_kubeconfig

    @property
    def api_url(self) -> str:
        return c.url(self.ports["kube-apiserver"])

    @property
    def pids(self) -> dict[str, int]:
        """Process name -> pid (its process group), e.g. for sampling RSS from /proc/<pid>/status."""
        return {process.name: process.pid for process in self.processes}

    @property
    def logs(self) -> dict[str, Path]:
        return {process.name: process.log for process in self.processes}

    @property
    def scheduler_names(self) -> dict[str, str]:
        """Strategy -> the schedulerName pods set for it; "default" -> the stock kube-scheduler's."""
        return {"default": DEFAULT_SCHEDULER, **{s: c.numa_scheduler_name(s) for s in self.strategies}}

    def metrics_text(self, process: str = "kube-apiserver") -> str:
        """The Prometheus text a process serves on /metrics (kube-apiserver's: apiserver_request_total, ...)."""
        if process not in self.pids:
            raise FleetError(f"no process {process!r} in this control plane (processes: {', '.join(self.pids)})")
        _, scheme = HEALTH.get(process, ("/readyz", "https"))
        url = f"{c.url(self.ports[process], scheme)}/metrics"
        try:
            status, body = processes.get(url, self._context, timeout=30.0)
        except (OSError, ssl.SSLError) as exc:
            raise FleetError(f"cannot read {url} ({process}): {getattr(exc, 'reason', exc)}") from None
        if status != 200:
            raise FleetError(f"{url} ({process}) answered HTTP {status}: {body[:200].decode(errors='replace')}")
        return body.decode()

    def stop_process(self, name: str) -> None:
        """Stop one process of the running plane (a scheduler between two sides of a bench); start_process starts
        it again with the same command line."""
        process = self._process(name)
        processes.stop_all([process], self.stop_grace)
        self.processes.remove(process)
        for batch in self._batches:
            if process in batch:
                batch.remove(process)

    def start_process(self, name: str) -> None:
        """Start a stopped process again and wait until it is ready (a new pid)."""
        if name in self.pids:
            raise FleetError(f"{name} is running already (pid {self.pids[name]})")
        if name not in self._commands or self._layout is None:
            raise FleetError(f"no process {name!r} was started in this control plane "
                             f"(known: {', '.join(self._commands) or 'none: start the plane first'})")
        self._run([(name, self._commands[name])], self._layout)

    def _process(self, name: str) -> processes.Process:
        for process in self.processes:
            if process.name == name:
                return process
        raise FleetError(f"no process {name!r} running in this control plane (running: {', '.join(self.pids)})")

    def __enter__(self) -> ControlPlane:
        self._check()
        started = time.monotonic()
        try:
            self._start()
        except (OSError, PkiError) as exc:  # the work directory, the PKI: the rest raise FleetError themselves
            self._stop()
            raise FleetError(f"cannot prepare the control plane under {self.workdir}: {exc}") from exc
        except BaseException:
            self._stop()
            raise
        self.startup_seconds = round(time.monotonic() - started, 1)
        self.progress.note(f"control plane ready in {self.startup_seconds} s at {self.api_url} ({self.directory})")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop()

    def _check(self) -> None:
        """Every refusal that needs no process: one line each, before anything starts."""
        known = set(SCORING_STRATEGIES)
        bad = [s for s in self.strategies if s not in known]
        if bad or len(set(self.strategies)) != len(self.strategies):
            what = f"unknown scoring strategy {', '.join(map(repr, bad))}" if bad else "a strategy named twice"
            raise FleetError(f"{what} in {list(self.strategies)}; expected some of {', '.join(SCORING_STRATEGIES)}")
        problem = self.binaries.problem()
        if problem:
            raise FleetError(problem)
        if self.nodes or self.pods:
            check_memory(self.nodes, self.pods, self.meminfo, schedulers=self.schedulers)
        self.ports = assign_ports(port_names(self.strategies), self.fixed_ports)

    def _start(self) -> None:
        self.processes, self._batches = [], []
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.directory = Path(tempfile.mkdtemp(prefix=PLANE_PREFIX, dir=self.workdir))
        layout = self._layout = c.Layout(self.directory)
        with self.progress.step("fleet PKI and configuration"):
            self.credentials = make_credentials(layout, self.api_url)
            self._context = ssl.create_default_context(cafile=str(self.credentials.ca))
            self._context.load_cert_chain(self.credentials.admin_cert, self.credentials.admin_key)
            for strategy in self.strategies:
                layout.config(c.numa_process(strategy)).write_text(
                    c.numa_scheduler_config(layout, strategy, self.resync_seconds))
            layout.config("kwok").write_text(c.kwok_config())
        bins, ports = self.binaries, self.ports
        self._run([("etcd", c.etcd_args(bins.etcd, layout, ports["etcd"], ports["etcd-peer"]))], layout)
        self._run([("kube-apiserver", c.apiserver_args(bins.kube_apiserver, layout, ports["kube-apiserver"],
                                                       ports["etcd"]))], layout)
        with self.progress.step("NodeResourceTopology CRD and the numa-scheduler's rights"):
            self._apply_lab_objects()
        rest = [
            ("kube-controller-manager", c.controller_manager_args(bins.kube_controller_manager, layout,
                                                                  ports["kube-controller-manager"], self.controllers)),
            ("kube-scheduler", c.scheduler_args(bins.kube_scheduler, layout, ports["kube-scheduler"])),
            *((c.numa_process(s), c.numa_scheduler_args(bins.numa_scheduler, layout, ports[c.numa_process(s)], s,
                                                         self.verbosity))
              for s in self.strategies),
            ("kwok", c.kwok_args(bins.kwok, layout, ports["kwok"], self.node_lease_seconds)),
        ]
        self._run(rest, layout)

    def _run(self, commands: Sequence[tuple[str, list[str]]], layout: c.Layout) -> None:
        """Start these processes together, then wait for each one's health path."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("KWOK_")}
        batch: list[processes.Process] = []
        self._batches.append(batch)
        for name, argv in commands:
            self._commands[name] = list(argv)
            # kwok would also read ~/.kwok/kwok.yaml (a user's own stages): its work directory is this run's.
            extra = {"KWOK_WORKDIR": str(layout.root / "kwok")} if name == "kwok" else {}
            batch.append(processes.start(name, argv, layout.log(name), {**env, **extra}, layout.root))
            self.processes.append(batch[-1])
        for process in batch:
            path, scheme = HEALTH.get(process.name, ("/readyz", "https"))
            url = f"{c.url(self.ports[process.name], scheme)}{path}"
            with self.progress.step(f"{process.name} ready ({url})"):
                processes.wait_ready(process, url, self._context, self.ready_timeout)

    def _apply_lab_objects(self) -> None:
        """The lab's CRD (from its Go module) and RBAC for the numa-scheduler's identity, applied server-side."""
        from numalab.deploy import api, manifests  # the kubernetes client: loaded only when a plane starts
        from numalab.deploy.numa_scheduler import rbac_manifest
        from numalab.k8s.nrt_crd import nrt_crd

        try:
            manifests.apply(self.kubeconfig, yaml.safe_dump(nrt_crd(), sort_keys=False))
            api.wait_crd_established(self.kubeconfig, CRD_NAME, CRD_TIMEOUT_SECONDS)
            manifests.apply(self.kubeconfig, rbac_manifest())
        except Exception as exc:  # the kubernetes client raises many kinds; the caller gets one
            said = api.problem_text(exc) if isinstance(exc, api.Problem) else f"{type(exc).__name__}: {exc}"
            raise FleetError(f"applying the NodeResourceTopology CRD or the numa-scheduler's rights failed: "
                             f"{said}") from None

    def _stop(self) -> None:
        """Stop every process, clients before the API server before etcd (the API server and etcd wait for their
        clients' streams when stopped under them), and remove the directory unless kept. A second Ctrl-C or
        SIGTERM cannot cut this short."""
        main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
        try:
            killed = [name for batch in reversed(self._batches) for name in processes.stop_all(batch, self.stop_grace)]
            if killed:
                self.progress.note(f"SIGKILL for {', '.join(killed)} (still running {self.stop_grace} s after SIGTERM)")
            if self.directory is not None and not self.keep:
                shutil.rmtree(self.directory, ignore_errors=True)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _credentials(self) -> Credentials:
        if self.credentials is None:
            raise FleetError("the control plane is not started: use it inside `with ControlPlane(...) as plane:`")
        return self.credentials
