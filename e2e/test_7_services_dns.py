"""Case 7: Services and cluster DNS. A client pod on the first worker finds a Service backed by a pod on the
second worker by its DNS name (CoreDNS at the kubelets' clusterDNS) and gets the backend's answer through
the Service's clusterIP (kube-proxy). Skipped-as-failed, never silently, on a one-worker cluster."""

from __future__ import annotations

import secrets

from kube import PodTrouble
from probe_pods import SERVICE_CASE as CASE
from probe_pods import backend_pod, client_pod, judge, service, service_name
from results import ALL_NODES, describe_failures

CLIENT_TIMEOUT = 240.0
"""Seconds for the client to finish: image pull and start under emulation, then up to 2 min of tries."""


def test_a_pod_reaches_a_service_on_another_worker_by_its_dns_name(cluster, workers, settings, results):
    names = sorted(workers)
    if len(names) < 2:
        results.add(names[0], ALL_NODES, CASE, False, detail="needs two workers: client and backend apart")
        raise AssertionError(describe_failures(results.failures(CASE)))
    client_worker, backend_worker = names[0], names[1]
    token = f"numa-lab-{secrets.token_hex(4)}"
    created = cluster.core.create_namespaced_service(cluster.namespace, service(cluster.namespace))
    cluster_ip = created.spec.cluster_ip
    backend = backend_pod(backend_worker, settings.probe_image, token)
    client = client_pod(client_worker, settings.probe_image, service_name(cluster.namespace))
    cluster.create_pods([backend, client])
    client_name = client["metadata"]["name"]
    try:
        ok, why = cluster.wait_until(client_name, _finished, timeout=CLIENT_TIMEOUT)
        log = cluster.log(client_name, "client") or ""
        if ok:
            ok, why = judge(log, token, cluster_ip)
        else:
            backend_state = cluster.explain(backend["metadata"]["name"])
            why += f"; client log: {' '.join(log.split())[-400:]}; backend: {backend_state}"
        results.add(client_worker, ALL_NODES, CASE, ok,
                    detail=f"to {backend_worker} via {service_name(cluster.namespace)}: {why}")
    except PodTrouble as exc:
        results.add(client_worker, ALL_NODES, CASE, False, detail=str(exc))
    finally:
        cluster.delete_pods([backend["metadata"]["name"], client_name])
    failures = results.failures(CASE)
    assert not failures, describe_failures(failures)


def _finished(pod: dict) -> tuple[bool | None, str]:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return True, "the client got its answer"
    if phase == "Failed":
        return False, "the client gave up (its log says what nslookup and nc saw)"
    return None, f"client {phase}"
