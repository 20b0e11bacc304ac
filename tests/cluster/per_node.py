"""Per-node truth under numa-align's DaemonSet, asked of the live cluster: each worker's pod runs with its own
node's settings (its kubelet's reserved CPUs, topology policy and scope, as that kubelet's /configz says),
publishes them in its node's NodeResourceTopology, is ready (registered with its kubelet), and runs only on
the nodes numa-lab labelled. The cluster test's workers differ (worker-3 reserves a whole core, 0-1;
worker-1 one CPU), so one node's settings applied to both would show here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client
from numa_align import nrt_api

NAMESPACE = "kube-system"
APP = "app.kubernetes.io/name=numa-align"
NODE_LABEL = "numa-lab/numa-align"


def check_daemonset_per_node(api_client: client.ApiClient, workers: Iterable[str],
                             configz: Callable[[str], dict[str, Any]]) -> None:
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    workers = sorted(workers)
    labelled = sorted(node.metadata.name for node in core.list_node(label_selector=NODE_LABEL).items)
    assert labelled == workers, labelled  # the server runs no kubelet numa-lab manages pods on
    nodes_json = core.read_namespaced_config_map("numa-align", NAMESPACE).data["nodes.json"]
    entries = json.loads(nodes_json)
    pods = {pod.spec.node_name: pod for pod in core.list_namespaced_pod(NAMESPACE, label_selector=APP).items}
    assert sorted(pods) == workers, sorted(pods)
    for worker in workers:
        kubelet = configz(worker)
        reserved = kubelet.get("reservedSystemCPUs") or "none"
        policy, scope = kubelet["topologyManagerPolicy"], kubelet.get("topologyManagerScope", "container")
        entry = entries[worker]
        assert (entry.get("NUMA_RESERVED_CPUS", "none"), entry["NUMA_ALIGN_TOPOLOGY_POLICY"],
                entry["NUMA_ALIGN_TOPOLOGY_SCOPE"]) == (reserved, policy, scope), (worker, entry, kubelet)
        pod = pods[worker]
        ready = next(c.status for c in pod.status.conditions or [] if c.type == "Ready")
        assert pod.status.phase == "Running" and ready == "True", (worker, pod.status)
        log = core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, container="numa-align")
        assert f"reserved CPUs {reserved}," in log, (worker, log[-2000:])
        assert f"topology manager {policy}/{scope})" in log, (worker, log[-2000:])
        nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, worker)
        attributes = {a["name"]: a["value"] for a in nrt.get("attributes") or []}
        assert (attributes["topologyManagerPolicy"], attributes["topologyManagerScope"]) == (policy, scope), (
            worker, attributes)
