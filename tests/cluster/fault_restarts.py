"""The cluster test's fault cases that restart something: etcd and the API server under the e2e suite, and a
worker's guest hard-reset (no clean shutdown) under a pinned pod. Rows go to faults.FAULTS."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from tests.cluster.faults import Fault, api, wait
from tests.cluster.guests import ssh


@dataclass
class Restart:
    """What the API server restart did: when it was asked, when /readyz answered again, and what failed."""

    at: float = 0.0
    ready_after: float | None = None
    error: str = ""


def restart_api_server_during(state: Path, delay: float, run: Callable[[], subprocess.CompletedProcess[str]]
                              ) -> tuple[subprocess.CompletedProcess[str], Restart]:
    """run() (the e2e suite) with etcd and kube-apiserver restarted `delay` seconds into it."""
    restart = Restart()

    def restart_them() -> None:
        time.sleep(delay)
        restart.at = time.time()
        done = ssh(state, "server", "systemctl restart etcd kube-apiserver")
        if done.returncode:
            restart.error = done.stderr
            return
        for _ in range(120):
            if ssh(state, "server", "curl -skf https://127.0.0.1:6443/readyz >/dev/null").returncode == 0:
                restart.ready_after = time.time() - restart.at
                return
            time.sleep(1)
        restart.error = "kube-apiserver not ready 120 s after its restart"

    thread = threading.Thread(target=restart_them, name="api-restart", daemon=True)
    thread.start()
    completed = run()
    thread.join(300)
    return completed, restart


def _renewed_after(coordination: client.CoordinationV1Api, namespace: str, name: str, after: float) -> bool:
    try:
        lease = coordination.read_namespaced_lease(name, namespace)
    except client.ApiException:
        return False
    renewed = lease.spec.renew_time
    return renewed is not None and renewed.timestamp() > after


def rode_through_api_restart(state: Path, workers: list[str], restart: Restart, suite_passed: bool) -> Fault:
    """After the restart: the API server really restarted (its unit's start and etcd's are newer than the
    request), numa-align on every worker and the NUMA-aware scheduler renewed their Leases since, every NRT
    object is there, and the e2e suite (its client waits out the outage) passed."""
    assert not restart.error and restart.at, restart
    started = ssh(state, "server", "for u in etcd kube-apiserver; do date -d \"$(systemctl show $u -p "
                                   "ActiveEnterTimestamp --value)\" +%s; done").stdout.split()
    assert len(started) == 2 and all(float(t) >= restart.at - 5 for t in started), (started, restart.at)
    coordination = client.CoordinationV1Api(api(state))
    custom = client.CustomObjectsApi(api(state))
    names = [("kube-system", f"numa-align-{worker}") for worker in workers] + [("kube-system", "numa-scheduler")]
    waited = wait("numa-align's and numa-scheduler's Leases renewed after the restart", lambda: all(
        _renewed_after(coordination, namespace, name, restart.at) for namespace, name in names), 120)
    for worker in workers:
        custom.get_cluster_custom_object("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", worker)
    assert suite_passed
    return Fault("API server + etcd restart", f"systemctl restart etcd kube-apiserver {restart.at:.0f} (mid e2e)",
                 "both restarted; e2e suite passed; Leases of numa-align (" + ", ".join(workers)
                 + ") and numa-scheduler renewed after; NRT objects there",
                 f"/readyz after {restart.ready_after:.0f} s; Leases renewed {waited:.0f} s after the suite",
                 "nothing (every e2e row passed)")
