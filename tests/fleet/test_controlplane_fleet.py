"""The real control plane on loopback; binaries missing from the cache are built from the Go proxy first.

One kwok node turns Ready with its Lease and keeps its capacity and no taint; a pod bound to it is left
alone by kwok (its status belongs to numa-lab's simulated kubelet); a Deployment's pod is made by the
controller-manager and bound by a numa-scheduler; and after the block no process of the plane is left.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client, config

from numalab.fleet.binaries import fleet_binaries
from numalab.fleet.components import KWOK_ANNOTATION
from numalab.fleet.controlplane import ControlPlane
from tests.fleet.test_controlplane import gone

pytestmark = pytest.mark.fleet

NODE = "fleet-node-1"
KWOK_SETTLE_SECONDS = 5.0  # kwok played its default pod stages within a second of the bind when it had them


def wait_for(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} not seen within {timeout:.0f} s")


def ready(core: client.CoreV1Api) -> bool:
    node = core.read_node(NODE)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def pod(name: str, **spec) -> dict:
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
    return {"metadata": {"name": name, "labels": {"app": name}}, "spec": {"containers": [container], **spec}}


def test_kwok_keeps_its_node_ready_leaves_pods_alone_and_nothing_outlives_the_plane(tmp_path):
    plane = ControlPlane(tmp_path, fleet_binaries(build=True), ["MostAllocated"], nodes=1, pods=2)
    with plane:
        pids = dict(plane.pids)
        api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        core.create_node({"metadata": {"name": NODE, "annotations": {KWOK_ANNOTATION: "fake"}},
                          "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                                     "allocatable": {"cpu": "14", "memory": "60Gi", "pods": "110"}}})
        wait_for(f"node {NODE} Ready", lambda: ready(core))
        node = core.read_node(NODE)
        assert node.spec.taints is None
        assert node.status.allocatable == {"cpu": "14", "memory": "60Gi", "pods": "110"}
        lease = client.CoordinationV1Api(api).read_namespaced_lease(NODE, "kube-node-lease")
        assert lease.spec.holder_identity

        core.create_namespaced_pod("default", pod("bound", nodeName=NODE))
        time.sleep(KWOK_SETTLE_SECONDS)
        bound = core.read_namespaced_pod("bound", "default")
        assert bound.status.phase == "Pending"
        assert not bound.status.conditions and not bound.status.pod_ip
        assert [m.manager for m in bound.metadata.managed_fields if m.subresource == "status"] == []

        template = {"metadata": {"labels": {"app": "placed"}},
                    "spec": pod("placed", schedulerName=plane.scheduler_names["MostAllocated"])["spec"]}
        apps.create_namespaced_deployment("default", {
            "metadata": {"name": "placed"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "placed"}}, "template": template}})
        placed = wait_for("the Deployment's pod bound by numa-aware-mostallocated", lambda: [
            p for p in core.list_namespaced_pod("default", label_selector="app=placed").items if p.spec.node_name])
        assert placed[0].spec.node_name == NODE
        assert placed[0].status.phase == "Pending"

        metrics = plane.metrics_text("kube-apiserver")
        assert 'resource="leases"' in metrics and "apiserver_request_total" in metrics
        assert "scheduler_schedule_attempts_total" in plane.metrics_text("numa-scheduler-mostallocated")
        directory = plane.directory
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                         "numa-scheduler-mostallocated", "kwok"}
    assert [name for name, pid in pids.items() if not gone(pid)] == []
    assert not directory.exists()
