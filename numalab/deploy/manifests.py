"""Cluster objects numa-lab applies from the controller: the numa-align DaemonSet (daemonset install).

The rendered manifest carries its own checksum (on the DaemonSet) and one of the settings (on the pod
template): the stage applies only when the checksum or the settings differ from what is live, and a settings
change rolls the pods (envFrom alone would not restart them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml
from kubernetes import client, utils
from kubernetes.client.rest import ApiException

from numalab.deploy import api
from numalab.render import render

NAMESPACE = "kube-system"
NAME = "numa-align"
SOCKET_DIR = "/var/lib/kubelet/device-plugins"
TEMPLATE = "plugin/daemonset.yaml.j2"
MANIFEST_CHECKSUM = "numa-lab/manifest-sha256"
SETTINGS_CHECKSUM = "numa-lab/settings-sha256"


@dataclass(frozen=True)
class Live:
    """What the cluster runs now: the DaemonSet's manifest checksum and the ConfigMap's settings."""

    checksum: str | None
    settings: dict[str, str] | None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def numa_align_daemonset(image: str, env: dict[str, str]) -> str:
    """The manifests, checksums included; NUMA_SOCKET_DIR and NUMA_SYSFS_ROOT are the DaemonSet's own."""
    settings = {k: v for k, v in env.items() if k not in ("NUMA_SOCKET_DIR", "NUMA_SYSFS_ROOT")}
    socket_dir = env.get("NUMA_SOCKET_DIR", SOCKET_DIR)
    values = dict(namespace=NAMESPACE, image=image, image_pull_policy="IfNotPresent", socket_dir=socket_dir,
                  pod_resources_dir=str(PurePosixPath(socket_dir).parent / "pod-resources"), sysfs_dir="/sys",
                  env=settings, metrics_port=None, node_selector={},
                  settings_checksum=_sha256(json.dumps(settings, sort_keys=True)))
    return render(TEMPLATE, **values, manifest_checksum=_sha256(render(TEMPLATE, **values, manifest_checksum="")))


def _documents(text: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc}


def needs_apply(text: str, live: Live | None) -> bool:
    """Apply `text` unless the cluster runs exactly it: the same checksum and the same settings."""
    documents = _documents(text)
    return (live is None or live.checksum != documents["DaemonSet"]["metadata"]["annotations"][MANIFEST_CHECKSUM]
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
    """Create each object, or replace it when it exists (the manifests are numa-lab's own)."""
    api_client = api.core_api(kubeconfig).api_client
    for obj in yaml.safe_load_all(text):
        if not obj:
            continue
        try:
            utils.create_from_dict(api_client, obj)
        except utils.FailToCreateError as exc:
            if not all(isinstance(e, ApiException) and e.status == 409 for e in exc.api_exceptions):
                raise
            _replace(api_client, obj)


def _replace(api_client: client.ApiClient, obj: dict) -> None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace", NAMESPACE)
    if kind == "DaemonSet":
        client.AppsV1Api(api_client).replace_namespaced_daemon_set(name, namespace, obj)
    elif kind == "ConfigMap":
        client.CoreV1Api(api_client).replace_namespaced_config_map(name, namespace, obj)
