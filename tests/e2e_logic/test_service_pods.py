"""The Services/DNS case's pods: unpinned, restricted, apart on two workers, and a verdict that needs both
the name resolved to the Service's clusterIP and the backend's own answer."""

from __future__ import annotations

from numalab.placement.pod_specs import qos_class
from tests.e2e_logic.conftest import load_e2e_module

pods = load_e2e_module("probe_pods")
IMAGE = "registry:5000/numa-lab/probe:1"


def test_backend_and_client_are_burstable_restricted_and_placed_by_worker() -> None:
    backend = pods.backend_pod("worker-2", IMAGE, "tok")
    client = pods.client_pod("worker-1", IMAGE, pods.service_name("ns"))
    for pod, worker in ((backend, "worker-2"), (client, "worker-1")):
        assert qos_class(pod["spec"]) == "Burstable"
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": worker}
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["runAsNonRoot"] is True
    selector = pods.service("ns")["spec"]["selector"]
    assert selector.items() <= backend["metadata"]["labels"].items()
    assert not selector.items() <= client["metadata"]["labels"].items()
    assert "dns-echo.ns.svc.cluster.local" in client["spec"]["containers"][0]["command"][2]
    assert "httpd -f -p 8080" in backend["spec"]["containers"][0]["command"][2]


def test_the_verdict_needs_the_service_address_and_the_backends_answer() -> None:
    good = "ADDRESS 10.96.4.5\nBODY tok\n"
    assert pods.judge(good, "tok", "10.96.4.5") == (True, "resolved to 10.96.4.5, answered tok")
    ok, why = pods.judge("ADDRESS 10.244.2.7\nBODY tok\n", "tok", "10.96.4.5")
    assert not ok and "not the Service's clusterIP 10.96.4.5" in why
    ok, why = pods.judge("ADDRESS 10.96.4.5\nBODY other\n", "tok", "10.96.4.5")
    assert not ok and "not the backend's 'tok'" in why
    ok, why = pods.judge("nslookup said: ;; connection timed out\n", "tok", "10.96.4.5")
    assert not ok and why.startswith("no answer:") and "timed out" in why
