"""Which schedulers a cluster runs, for `numalab lint --kubeconfig`: a pod naming one that does not run is
never bound, and nothing in the pod says why.

A scheduler with leader election holds a Lease it renews every few seconds; numa-lab's NUMA-aware scheduler
(numalab.model.numa_scheduler) holds `numa-scheduler` in kube-system. A Lease not renewed within a minute
belongs to a scheduler that stopped. default-scheduler is taken to run (numa-lab's runs without a Lease).
"""

from __future__ import annotations

import datetime
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError

from numalab.cli import UsageError
from numalab.model.numa_scheduler import LEASE_NAMESPACE, NAME, SCHEDULER_NAME

LEASE_SCHEDULERS = {NAME: SCHEDULER_NAME}
FRESH_SECONDS = 60.0


def running_schedulers(kubeconfig: Path, now: datetime.datetime | None = None) -> frozenset[str]:
    """The scheduler names whose Lease was renewed within FRESH_SECONDS; unreadable cluster: UsageError."""
    now = now or datetime.datetime.now(datetime.UTC)
    try:
        api = client.CoordinationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        leases = api.list_namespaced_lease(LEASE_NAMESPACE, _request_timeout=10).items
    except (ApiException, HTTPError, OSError, ConfigException) as exc:
        raise UsageError(f"lint --kubeconfig {kubeconfig}: cannot list Leases in {LEASE_NAMESPACE}: "
                         f"{getattr(exc, 'reason', None) or exc}") from None
    running = set()
    for lease in leases:
        scheduler = LEASE_SCHEDULERS.get(lease.metadata.name)
        renewed = lease.spec.renew_time if lease.spec else None
        if scheduler and renewed is not None and (now - renewed).total_seconds() <= FRESH_SECONDS:
            running.add(scheduler)
    return frozenset(running)
