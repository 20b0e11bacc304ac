"""Cluster objects numa-lab applies from the controller: cluster DNS (CoreDNS) and the numa-align DaemonSet
(daemonset install), with the node label that keeps it to the nodes numa-lab manages.

A rendered manifest carries its own checksum (on its workload): a stage applies only when the checksum
differs from what is live. The numa-align one also carries a checksum of its settings (on the pod
template), so a settings change rolls the pods (a ConfigMap change alone would not restart them). Every
object is applied server-side with numa-lab as its field manager, whatever its kind.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml
from kubernetes import client, dynamic

from numalab.checkpoint_guard import RECORD
from numalab.deploy import api
from numalab.model.plugin_settings import DaemonSetSettings
from numalab.render import render

NAMESPACE = "kube-system"
NAME = "numa-align"
SOCKET_DIR = "/var/lib/kubelet/device-plugins"
TEMPLATE = "plugin/daemonset.yaml.j2"
MANIFEST_CHECKSUM = "numa-lab/manifest-sha256"
SETTINGS_CHECKSUM = "numa-lab/settings-sha256"
FIELD_MANAGER = "numa-lab"
APP_LABEL = "app.kubernetes.io/name"
NODE_LABEL = "numa-lab/numa-align"
"""On the nodes numa-lab runs kubelets with its managers on: the DaemonSet's nodeSelector, so a server that
runs no pinned pods never gets a numa-align that would publish a policy its kubelet does not have."""
NODE_LABEL_VALUE = "daemonset"
NODE_SETTINGS_DIR = "/etc/numa-align/nodes"
NODE_SETTINGS_FILE = "nodes.json"


@dataclass(frozen=True)
class Live:
    """What the cluster runs now: the DaemonSet's manifest checksum and the ConfigMap's settings."""

    checksum: str | None
    settings: dict[str, str] | None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def checksummed(template: str, **values: object) -> str:
    """`template` rendered with manifest_checksum: the sha256 of its own rendering with an empty one."""
    return render(template, **values, manifest_checksum=_sha256(render(template, **values, manifest_checksum="")))


def manifest_checksum(text: str, kind: str) -> str:
    """The checksum the rendered manifest carries on its object of `kind`."""
    return _documents(text)[kind]["metadata"]["annotations"][MANIFEST_CHECKSUM]


def numa_align_daemonset(image: str, settings: DaemonSetSettings, nrt: bool = False) -> str:
    """The manifests, checksums included: every node's settings in one ConfigMap file, the pods kept to the
    nodes labelled NODE_LABEL. With `nrt` the pods get their ServiceAccount's token to publish with."""
    config = {NODE_SETTINGS_FILE: settings.nodes_json()}
    socket_dir = settings.socket_dir
    values = dict(namespace=NAMESPACE, image=image, image_pull_policy="IfNotPresent", socket_dir=socket_dir,
                  pod_resources_dir=str(PurePosixPath(socket_dir).parent / "pod-resources"), sysfs_dir="/sys",
                  guard_dir=str(PurePosixPath(RECORD).parent),
                  config=config, node_settings_dir=NODE_SETTINGS_DIR, node_settings_file=NODE_SETTINGS_FILE,
                  metrics_port=settings.metrics_port, node_selector={NODE_LABEL: NODE_LABEL_VALUE}, nrt=nrt,
                  settings_checksum=_sha256(json.dumps(config, sort_keys=True)))
    return checksummed(TEMPLATE, **values)


def _documents(text: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc}


def needs_apply(text: str, live: Live | None) -> bool:
    """Apply `text` unless the cluster runs exactly it: the same checksum and the same settings."""
    documents = _documents(text)
    return (live is None or live.checksum != manifest_checksum(text, "DaemonSet")
            or live.settings != (documents["ConfigMap"].get("data") or {}))


def live_state(kubeconfig: Path) -> Live | None:
    """The numa-align objects as the cluster has them, or None (absent, or no API)."""
    try:
        core = api.core_api(kubeconfig)
        ds = client.AppsV1Api(core.api_client).read_namespaced_daemon_set(NAME, NAMESPACE, _request_timeout=5)
        config_map = core.read_namespaced_config_map(NAME, NAMESPACE, _request_timeout=5)
    except api.Problem:
        return None
    return Live((ds.metadata.annotations or {}).get(MANIFEST_CHECKSUM), dict(config_map.data or {}))


def apply(kubeconfig: Path, text: str) -> None:
    """Apply each object server-side (created, or updated to exactly these fields; numa-lab owns them)."""
    dynamic_client = dynamic.DynamicClient(api.core_api(kubeconfig).api_client)
    for obj in yaml.safe_load_all(text):
        if not obj:
            continue
        resource = dynamic_client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        dynamic_client.server_side_apply(resource, body=obj, name=obj["metadata"]["name"], namespace=namespace,
                                         field_manager=FIELD_MANAGER, force_conflicts=True)


def cluster_role_checksum(kubeconfig: Path, name: str) -> str | None:
    """The manifest checksum on live ClusterRole `name`, or None (absent, or no API)."""
    try:
        rbac = client.RbacAuthorizationV1Api(api.core_api(kubeconfig).api_client)
        found = rbac.read_cluster_role(name, _request_timeout=5)
    except api.Problem:
        return None
    return (found.metadata.annotations or {}).get(MANIFEST_CHECKSUM)


def numa_align_present(kubeconfig: Path) -> bool:
    """Does the cluster hold numa-align's DaemonSet or any of its pods? False when the API does not answer."""
    try:
        core = api.core_api(kubeconfig)
        daemonsets = client.AppsV1Api(core.api_client).list_namespaced_daemon_set(
            NAMESPACE, field_selector=f"metadata.name={NAME}", _request_timeout=5).items
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{APP_LABEL}={NAME}", _request_timeout=5).items
    except api.Problem:
        return False
    return bool(daemonsets or pods)


def nodes_to_label(kubeconfig: Path, nodes: list[str]) -> list[str]:
    """The `nodes` that do not carry NODE_LABEL yet (all of them when the API does not answer: the label
    call then says why)."""
    missing = []
    for name in nodes:
        found = api.read_node(kubeconfig, name)
        if found is None or (found.metadata.labels or {}).get(NODE_LABEL) != NODE_LABEL_VALUE:
            missing.append(name)
    return missing


def label_nodes(kubeconfig: Path, nodes: list[str]) -> None:
    """Put NODE_LABEL on each of `nodes`, which the DaemonSet's nodeSelector asks for."""
    core = api.core_api(kubeconfig)
    for name in nodes:
        core.patch_node(name, {"metadata": {"labels": {NODE_LABEL: NODE_LABEL_VALUE}}}, _request_timeout=10)


def remove_numa_align(kubeconfig: Path, timeout: float) -> None:
    """Delete the DaemonSet, its ConfigMap and ServiceAccount, take NODE_LABEL off the nodes, and wait until its
    last pod is gone (each pod removes its sockets as it stops), so a systemd install never meets a second
    plugin."""
    core = api.core_api(kubeconfig)
    apps = client.AppsV1Api(core.api_client)
    for delete in (apps.delete_namespaced_daemon_set, core.delete_namespaced_config_map,
                   core.delete_namespaced_service_account):
        try:
            delete(NAME, NAMESPACE, propagation_policy="Foreground")
        except api.ApiException as exc:
            if exc.status != 404:
                raise
    for node in core.list_node(label_selector=NODE_LABEL, _request_timeout=10).items:
        core.patch_node(node.metadata.name, {"metadata": {"labels": {NODE_LABEL: None}}}, _request_timeout=10)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not numa_align_present(kubeconfig):
            return
        time.sleep(3)
    raise RuntimeError(f"numa-align pods still in {NAMESPACE} {timeout:.0f} s after the DaemonSet was deleted: "
                       f"{api.pods_and_last_events(core, NAMESPACE, NAME)}")
