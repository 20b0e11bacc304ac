"""The numa-align DaemonSet as the daemonset install renders it: unprivileged with two kubelet hostPaths and
sysfs read-only, each node's own settings in one file, kept to the labelled nodes, ready once registered,
a settings checksum that rolls the pods, and an apply decided by what is live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from numa_align import guard_report

from numalab import checkpoint_guard
from numalab.deploy import manifests
from numalab.deploy.manifests import (
    MANIFEST_CHECKSUM,
    SETTINGS_CHECKSUM,
    Live,
    needs_apply,
)
from numalab.model.errors import ValidationError
from numalab.model.plugin_settings import daemonset_settings

IMAGE = "registry:5000/numa-align:0.1.0"
SETTINGS = {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins", "NUMA_CAPACITY": "cpus",
            "NUMA_RESERVED_CPUS": "0-1"}


def numa_align_daemonset(image: str, settings: dict[str, str], others: dict | None = None, nrt: bool = False) -> str:
    """The manifest for worker-1 with `settings` (and `others`: more nodes' settings)."""
    return manifests.numa_align_daemonset(image, daemonset_settings({"worker-1": settings, **(others or {})}), nrt)


def documents(text: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc}


def pod_spec(text: str) -> dict:
    return documents(text)["DaemonSet"]["spec"]["template"]["spec"]


def live(text: str) -> Live:
    """What the cluster holds once `text` is applied."""
    docs = documents(text)
    return Live(docs["DaemonSet"]["metadata"]["annotations"][MANIFEST_CHECKSUM], docs["ConfigMap"]["data"])


def test_the_plugin_runs_unprivileged_with_a_read_only_root() -> None:
    (container,) = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"] == {"drop": ["ALL"]}


def test_it_mounts_device_plugins_writable_pod_resources_sysfs_and_the_guard_record_read_only() -> None:
    spec = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))
    (container,) = spec["containers"]
    mounts = {m["name"]: (m["mountPath"], m.get("readOnly", False)) for m in container["volumeMounts"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert host_paths == {"device-plugins": "/var/lib/kubelet/device-plugins",
                          "pod-resources": "/var/lib/kubelet/pod-resources", "sysfs": "/sys",
                          "guard-record": "/var/lib/numa-lab"}
    assert mounts["device-plugins"] == (env["NUMA_SOCKET_DIR"], False)  # the plugin creates its sockets there
    assert mounts["pod-resources"] == ("/var/lib/kubelet/pod-resources", True)
    assert mounts["sysfs"] == (env["NUMA_SYSFS_ROOT"], True) and env["NUMA_SYSFS_ROOT"] == "/host/sys"
    # at the same path: the plugin's default record is the guard's, read where the guard writes it
    assert mounts["guard-record"] == (str(guard_report.RECORD.parent), True)
    assert guard_report.RECORD == Path(checkpoint_guard.RECORD) and "NUMA_ALIGN_GUARD_RECORD" not in env


def test_pod_resources_sits_beside_another_device_plugins_dir() -> None:
    k0s = {**SETTINGS, "NUMA_SOCKET_DIR": "/var/lib/k0s/kubelet/device-plugins"}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod_spec(numa_align_daemonset(IMAGE, k0s))["volumes"]
                  if "hostPath" in v}
    assert host_paths["pod-resources"] == "/var/lib/k0s/kubelet/pod-resources"


def test_a_settings_change_changes_the_pod_template_so_the_pods_roll() -> None:
    before, after = (documents(numa_align_daemonset(IMAGE, settings))
                     for settings in (SETTINGS, {**SETTINGS, "NUMA_CAPACITY": "100"}))
    checksum = [doc["DaemonSet"]["spec"]["template"]["metadata"]["annotations"][SETTINGS_CHECKSUM]
                for doc in (before, after)]
    assert checksum[0] != checksum[1]
    assert json.loads(after["ConfigMap"]["data"]["nodes.json"])["worker-1"]["NUMA_CAPACITY"] == "100"


def test_the_same_inputs_render_the_same_manifest() -> None:
    assert numa_align_daemonset(IMAGE, SETTINGS) == numa_align_daemonset(IMAGE, dict(reversed(SETTINGS.items())))


def test_what_is_live_is_not_applied_again() -> None:
    text = numa_align_daemonset(IMAGE, SETTINGS)
    assert not needs_apply(text, live(text))


@pytest.mark.parametrize("change", [
    {"NUMA_CAPACITY": "100"}, {"NUMA_LOG_LEVEL": "debug"}, {"NUMA_RESERVED_CPUS": "0-3"},
], ids=["capacity", "a new setting", "reserved cpus"])
def test_changed_settings_are_applied_with_the_same_image(change: dict[str, str]) -> None:
    running = numa_align_daemonset(IMAGE, SETTINGS)
    assert needs_apply(numa_align_daemonset(IMAGE, {**SETTINGS, **change}), live(running))


def test_a_new_image_an_absent_daemonset_or_edited_settings_are_applied() -> None:
    text = numa_align_daemonset(IMAGE, SETTINGS)
    assert needs_apply(numa_align_daemonset("registry:5000/numa-align:0.2.0", SETTINGS), live(text))
    assert needs_apply(text, None)
    assert needs_apply(text, Live(live(text).checksum, {"nodes.json": "{}"}))


def test_the_plugin_asks_no_cpu_so_pinned_pods_can_take_every_allocatable_cpu() -> None:
    (container,) = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))["containers"]
    assert "cpu" not in container["resources"]["requests"] and "cpu" not in container["resources"].get("limits", {})
    assert container["resources"]["requests"]["memory"] == "64Mi"


MIXED = {"worker-1": {**SETTINGS, "NUMA_RESERVED_CPUS": "0", "NUMA_ALIGN_TOPOLOGY_POLICY": "single-numa-node"},
         "worker-3": {**SETTINGS, "NUMA_RESERVED_CPUS": "0-1", "NUMA_ALIGN_TOPOLOGY_POLICY": "restricted"}}


def test_each_node_finds_its_own_settings_in_the_mounted_file() -> None:
    docs = documents(manifests.numa_align_daemonset(IMAGE, daemonset_settings(MIXED), nrt=True))
    nodes = json.loads(docs["ConfigMap"]["data"]["nodes.json"])
    assert nodes == {name: {k: v for k, v in s.items() if k != "NUMA_SOCKET_DIR"} for name, s in MIXED.items()}
    spec = docs["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {item["name"]: item.get("value") or item["valueFrom"]["fieldRef"]["fieldPath"] for item in container["env"]}
    assert env["NUMA_ALIGN_NODE_SETTINGS"] == "/etc/numa-align/nodes/nodes.json" and env["NODE_NAME"] == "spec.nodeName"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "node-settings")
    assert mount == {"name": "node-settings", "mountPath": "/etc/numa-align/nodes", "readOnly": True}
    assert {"name": "node-settings", "configMap": {"name": "numa-align"}} in spec["volumes"]
    assert "envFrom" not in container  # nothing node-specific reaches a pod but through its node's entry


def test_the_pods_run_only_on_labelled_nodes_and_are_ready_once_registered() -> None:
    spec = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))
    assert spec["nodeSelector"] == {"numa-lab/numa-align": "daemonset"}
    (container,) = spec["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9201, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    (container,) = pod_spec(numa_align_daemonset(IMAGE, {**SETTINGS, "NUMA_METRICS_ADDR": ""}))["containers"]
    assert "readinessProbe" not in container and "ports" not in container  # no server to ask


@pytest.mark.parametrize(("key", "values"), [
    ("NUMA_SOCKET_DIR", ("/var/lib/kubelet/device-plugins", "/var/lib/k0s/kubelet/device-plugins")),
    ("NUMA_METRICS_ADDR", (":9201", ":9300")),
])
def test_what_the_one_pod_template_holds_must_agree_between_nodes(key: str, values: tuple[str, str]) -> None:
    with pytest.raises(ValidationError) as raised:
        daemonset_settings({"worker-1": {**SETTINGS, key: values[0]}, "worker-3": {**SETTINGS, key: values[1]}})
    message = str(raised.value)
    assert message.startswith(f"numa_align_settings.{key}") and f"worker-1={values[0]!r}" in message
    assert f"worker-3={values[1]!r}" in message and "numa_align_install: systemd" in message


def test_one_nodes_change_rolls_the_pods() -> None:
    running = manifests.numa_align_daemonset(IMAGE, daemonset_settings(MIXED))
    changed = {**MIXED, "worker-3": {**MIXED["worker-3"], "NUMA_RESERVED_CPUS": "0-3"}}
    assert needs_apply(manifests.numa_align_daemonset(IMAGE, daemonset_settings(changed)), live(running))
