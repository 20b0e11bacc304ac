"""The cluster's API, asked from the controller with the admin kubeconfig the pki stage wrote.

Stages use it in two ways: before the run, to learn whether there is anything to do (a failure to
connect counts as "not there yet"); during the run, through `python.call`, to create or wait.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from numa_align import nrt_api
from urllib3.exceptions import HTTPError

# ConfigException: no kubeconfig yet (RKE2's server writes it on its first start).
Problem = (ApiException, HTTPError, OSError, ConfigException)


def core_api(kubeconfig: Path) -> client.CoreV1Api:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    api_client.configuration.retries = 0
    return client.CoreV1Api(api_client)


def read_node(kubeconfig: Path, node: str, must_answer: bool = False) -> Any | None:
    """The Node object, or None when it does not exist or the API does not answer. With `must_answer`, None
    means only that the API answered that it does not exist (404): no answer, or any other error, is raised
    (one of Problem; problem_text says it in one line), for a caller that must not take one for the other."""
    try:
        return core_api(kubeconfig).read_node(node, _request_timeout=5)
    except Problem as exc:
        if must_answer and not (isinstance(exc, ApiException) and exc.status == 404):
            raise
        return None


def problem_text(exc: BaseException) -> str:
    """One line for one of Problem: the API server's status and reason, or why none answered."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}" if exc.status else f"no answer: {exc.reason}"
    return " ".join(str(exc).split()) or type(exc).__name__


def node_is_ready(node: Any | None) -> bool:
    conditions = (node.status.conditions or []) if node is not None and node.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def ensure_node(kubeconfig: Path, node: str, pod_cidr: str) -> None:
    """Create Node `node` with its pod CIDR before its kubelet registers (the kubelet then adopts it)."""
    api = core_api(kubeconfig)
    try:
        api.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node),
                                      spec=client.V1NodeSpec(pod_cidr=pod_cidr, pod_cidrs=[pod_cidr])))
    except ApiException as exc:
        if exc.status != 409:
            raise
        existing = api.read_node(node).spec.pod_cidr
        if existing != pod_cidr:
            raise RuntimeError(f"node {node} exists with podCIDR {existing}, not {pod_cidr}: delete the Node") from None


def wait_node_ready(kubeconfig: Path, node: str, timeout: float, unit: str = "kubelet") -> None:
    """`unit` is the service that runs the node's kubelet, named in the error (rke2-agent, rke2-server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node_is_ready(read_node(kubeconfig, node)):
            return
        time.sleep(3)
    raise RuntimeError(f"node {node} not Ready after {timeout:.0f} s; see `journalctl -u {unit}` on {node}")



def deployment_ready(kubeconfig: Path, namespace: str, name: str) -> bool:
    """Has Deployment `name` rolled out: every replica updated and available? False when absent or no API."""
    try:
        found = client.AppsV1Api(core_api(kubeconfig).api_client).read_namespaced_deployment(
            name, namespace, _request_timeout=5)
    except Problem:
        return False
    return _rolled_out(found)


def _rolled_out(deployment: Any) -> bool:
    status, wanted = deployment.status, deployment.spec.replicas or 0
    return ((status.observed_generation or 0) >= (deployment.metadata.generation or 0)
            and (status.updated_replicas or 0) == wanted and (status.available_replicas or 0) == wanted
            and (status.replicas or 0) == wanted)


def wait_deployment_ready(kubeconfig: Path, namespace: str, deployment: str, timeout: float) -> None:
    """Wait for the rollout of `deployment`; a timeout names each of its pods with its phase and last event."""
    core = core_api(kubeconfig)
    apps = client.AppsV1Api(core.api_client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if _rolled_out(apps.read_namespaced_deployment(deployment, namespace, _request_timeout=5)):
                return
        except Problem:
            pass
        time.sleep(3)
    raise RuntimeError(f"Deployment {namespace}/{deployment} not rolled out after {timeout:.0f} s: "
                       f"{pods_and_last_events(core, namespace, deployment)}")


def pods_and_last_events(core: client.CoreV1Api, namespace: str, app: str) -> str:
    """`pod (phase on node): last event` for every pod labelled app.kubernetes.io/name=`app`."""
    try:
        pods = core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/name={app}",
                                        _request_timeout=5).items
    except Problem as exc:
        return f"its pods could not be listed ({exc})"
    if not pods:
        return f"no pod was created (see `kubectl -n {namespace} describe deployment {app}`)"
    described = []
    for pod in pods:
        name = pod.metadata.name
        try:
            events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}",
                                                _request_timeout=5).items
        except Problem:
            events = []
        events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
        last = f"{events[-1].reason}: {events[-1].message}" if events else "no event"
        described.append(f"{name} ({pod.status.phase} on {pod.spec.node_name or 'no node'}): {last}")
    return "; ".join(described)


def wait_daemonset_ready(kubeconfig: Path, namespace: str, daemonset: str, timeout: float,
                         nodes: int | None = None) -> None:
    """Wait until every scheduled pod of `daemonset` runs its current template and is ready (and, given
    `nodes`, it is scheduled on that many nodes); a timeout names each pod with its phase and last event."""
    core = core_api(kubeconfig)
    apps = client.AppsV1Api(core.api_client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = apps.read_namespaced_daemon_set(daemonset, namespace, _request_timeout=5)
            status, wanted = found.status, found.status.desired_number_scheduled or 0
            if ((status.observed_generation or 0) >= (found.metadata.generation or 0) and wanted > 0
                    and (nodes is None or wanted == nodes)
                    and (status.updated_number_scheduled or 0) == wanted and (status.number_ready or 0) == wanted):
                return
        except Problem:
            pass
        time.sleep(3)
    raise RuntimeError(f"DaemonSet {namespace}/{daemonset} not ready after {timeout:.0f} s: "
                       f"{pods_and_last_events(core, namespace, daemonset)}")


def crd_established(kubeconfig: Path, name: str) -> bool:
    """Does the API server serve CustomResourceDefinition `name` (condition Established)? False when absent
    or when the API does not answer."""
    try:
        extensions = client.ApiextensionsV1Api(core_api(kubeconfig).api_client)
        found = extensions.read_custom_resource_definition(name, _request_timeout=5)
    except Problem:
        return False
    return any(c.type == "Established" and c.status == "True" for c in (found.status.conditions or []))


def wait_crd_established(kubeconfig: Path, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if crd_established(kubeconfig, name):
            return
        time.sleep(1)
    raise RuntimeError(f"CustomResourceDefinition {name} not Established after {timeout:.0f} s; "
                       "see the kube-apiserver log on the server")


def nrt_created(kubeconfig: Path) -> dict[str, float]:
    """Each NodeResourceTopology object's name and creation time (seconds since the epoch); {} when there are
    none, no CRD or no API."""
    try:
        custom = client.CustomObjectsApi(core_api(kubeconfig).api_client)
        listed = custom.list_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL,
                                                   _request_timeout=5)
    except Problem:
        return {}
    return {item["metadata"]["name"]: _epoch(item["metadata"]["creationTimestamp"])
            for item in listed.get("items", [])}


def _epoch(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def wait_nrt_objects(kubeconfig: Path, nodes: list[str], timeout: float) -> None:
    """Wait until every node in `nodes` has its NodeResourceTopology object (numa-align published it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        missing = sorted(set(nodes) - set(nrt_created(kubeconfig)))
        if not missing:
            return
        time.sleep(2)
    raise RuntimeError(f"no NodeResourceTopology object for {', '.join(missing)} after {timeout:.0f} s; "
                       "see numa-align's log on those nodes (journalctl -u numa-align, or its pod's log)")
