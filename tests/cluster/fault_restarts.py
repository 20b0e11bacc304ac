"""The cluster test's API server fault: etcd and kube-apiserver restarted under the e2e suite, which rides
through it, and so do numa-align and the NUMA-aware scheduler. Its row goes to faults.FAULTS.

Times are compared on the clock that wrote them (a guest's clock may be seconds off the host's): the units'
start with the server's clock read just before the restart, the Leases' renewTime with the value each had
just before it."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from numa_align import nrt_api

from tests.cluster.faults import Fault, api, wait
from tests.cluster.guests import ssh


@dataclass
class Restart:
    """What the API server restart did: when it was asked, when /readyz answered again, and what failed."""

    at: float = 0.0
    server_clock: float = 0.0
    """The server's own clock just before the restart."""
    renewed: dict[tuple[str, str], float] | None = None
    """Each watched Lease's renewTime just before the restart."""
    ready_after: float | None = None
    not_ready: list[str] = field(default_factory=list)
    """The /readyz checks that failed last before it passed: what the API server waited for."""
    error: str = ""


READY_LIMIT = 360.0
"""Seconds /readyz may take after the restart. Measured in the cluster test, beside the other tests: 161-263 s
while the API server's stop waited for systemd's SIGKILL (etcd stopped first) and its open watches; 128 s since
(components.APISERVER_WATCH_DRAIN; 30 s on an idle lab)."""
READY_POLL = 3.0
"""Seconds between /readyz asks (curl on the server, over ssh) while the API server starts again: each is a process
and a TLS handshake on the starting server's one core. A new ssh connection for each made them about 3 s apart;
through one kept connection (guests.ssh) they would be 1 s apart, and the two runs with that (wb, wc) failed in
the e2e suite around the restart (a PodResources call over 10 s on worker-3; the NUMA-aware scheduler's cache
stale for over 40 s). Not shown to be the cause, so the asks keep the pace they had."""


def failing_checks(verbose: str) -> list[str]:
    """The names of the failed checks in /readyz?verbose's answer ("[-]poststarthook/x failed: reason withheld")."""
    return [line[3:].split(" ", 1)[0] for line in verbose.splitlines() if line.startswith("[-]")]


LEASES = ("kube-system", "numa-scheduler")


def _leases(workers: list[str]) -> list[tuple[str, str]]:
    return [("kube-system", f"numa-align-{worker}") for worker in workers] + [LEASES]


def _renew_time(coordination: client.CoordinationV1Api, namespace: str, name: str) -> float | None:
    try:
        renewed = coordination.read_namespaced_lease(name, namespace).spec.renew_time
    except client.ApiException:
        return None
    return None if renewed is None else renewed.timestamp()


def restart_api_server_during(state: Path, workers: list[str], delay: float,
                              run: Callable[[], subprocess.CompletedProcess[str]]
                              ) -> tuple[subprocess.CompletedProcess[str], Restart]:
    """run() (the e2e suite) with etcd and kube-apiserver restarted `delay` seconds into it."""
    restart = Restart()
    coordination = client.CoordinationV1Api(api(state))

    def restart_them() -> None:
        time.sleep(delay)
        restart.renewed = {lease: _renew_time(coordination, *lease) or 0.0 for lease in _leases(workers)}
        restart.server_clock = float(ssh(state, "server", "date +%s.%N").stdout.strip() or 0)
        restart.at = time.time()
        done = ssh(state, "server", "systemctl restart etcd kube-apiserver")
        if done.returncode:
            restart.error = done.stderr
            return
        while time.time() - restart.at < READY_LIMIT:
            said = ssh(state, "server", "curl -sk 'https://127.0.0.1:6443/readyz?verbose'")
            if said.returncode == 0 and "readyz check passed" in said.stdout:
                restart.ready_after = time.time() - restart.at
                return
            restart.not_ready = failing_checks(said.stdout) or restart.not_ready
            time.sleep(READY_POLL)
        restart.error = (f"kube-apiserver not ready {READY_LIMIT:.0f} s after its restart "
                         f"(failing: {', '.join(restart.not_ready) or 'no answer'})")

    thread = threading.Thread(target=restart_them, name="api-restart", daemon=True)
    thread.start()
    completed = run()
    thread.join(READY_LIMIT + 60)
    return completed, restart


def rode_through_api_restart(state: Path, workers: list[str], restart: Restart, suite_passed: bool) -> Fault:
    """After the restart: the API server really restarted (its unit's start and etcd's are newer than the
    request), numa-align on every worker and the NUMA-aware scheduler renewed their Leases since, every NRT
    object is there, and the e2e suite (its client waits out the outage) passed."""
    assert not restart.error and restart.at and restart.renewed is not None, restart
    started = ssh(state, "server", "for u in etcd kube-apiserver; do date -d \"$(systemctl show $u -p "
                                   "ActiveEnterTimestamp --value)\" +%s; done").stdout.split()
    assert len(started) == 2 and all(float(t) >= int(restart.server_clock) for t in started), (
        started, restart.server_clock)  # the fault took effect: both units started since the restart was asked
    coordination = client.CoordinationV1Api(api(state))
    custom = client.CustomObjectsApi(api(state))
    renewed = restart.renewed
    waited = wait("numa-align's and numa-scheduler's Leases renewed since the restart", lambda: all(
        (_renew_time(coordination, *lease) or 0.0) > renewed[lease] for lease in renewed), 120)
    for worker in workers:
        custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, worker)
    assert suite_passed
    return Fault("API server + etcd restart", f"systemctl restart etcd kube-apiserver {restart.at:.0f} (mid e2e)",
                 "both restarted; e2e suite passed; Leases of numa-align (" + ", ".join(workers)
                 + ") and numa-scheduler renewed after; NRT objects there",
                 f"/readyz after {restart.ready_after:.0f} s (last waiting for: "
                 f"{', '.join(restart.not_ready) or '-'}); "
                 f"Leases renewed {waited:.0f} s after the suite",
                 "nothing (every e2e row passed)")
