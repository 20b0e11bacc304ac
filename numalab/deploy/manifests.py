"""Cluster objects numa-lab applies from the controller: the numa-align DaemonSet (daemonset install)."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client, utils
from kubernetes.client.rest import ApiException

from numalab.deploy import api
from numalab.render import render

NAMESPACE = "kube-system"
SOCKET_DIR = "/var/lib/kubelet/device-plugins"


def numa_align_daemonset(image: str, env: dict[str, str]) -> str:
    settings = {k: v for k, v in env.items() if k not in ("NUMA_SOCKET_DIR", "NUMA_SYSFS_ROOT")}
    return render("plugin/daemonset.yaml.j2", namespace=NAMESPACE, image=image, image_pull_policy="IfNotPresent",
                  socket_dir=env.get("NUMA_SOCKET_DIR", SOCKET_DIR), sysfs_dir="/sys", env=settings,
                  metrics_port=None, node_selector={})


def daemonset_image(kubeconfig: Path) -> str | None:
    """The image the numa-align DaemonSet runs now, or None (absent, or no API)."""
    try:
        apps = client.AppsV1Api(api.core_api(kubeconfig).api_client)
        ds = apps.read_namespaced_daemon_set("numa-align", NAMESPACE, _request_timeout=5)
    except api.Problem:
        return None
    return ds.spec.template.spec.containers[0].image


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
