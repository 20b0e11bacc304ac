"""The numa-align DaemonSet as the daemonset install renders it: unprivileged with two kubelet hostPaths and
sysfs read-only, a settings checksum that rolls the pods, and an apply decided by what is live."""

from __future__ import annotations

import pytest
import yaml

from numalab.deploy.manifests import (
    MANIFEST_CHECKSUM,
    SETTINGS_CHECKSUM,
    Live,
    needs_apply,
    numa_align_daemonset,
)

IMAGE = "registry:5000/numa-align:0.1.0"
SETTINGS = {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins", "NUMA_CAPACITY": "cpus",
            "NUMA_RESERVED_CPUS": "0-1"}


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


def test_it_mounts_device_plugins_writable_pod_resources_and_sysfs_read_only() -> None:
    spec = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))
    (container,) = spec["containers"]
    mounts = {m["name"]: (m["mountPath"], m.get("readOnly", False)) for m in container["volumeMounts"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    env = {item["name"]: item["value"] for item in container["env"]}
    assert host_paths == {"device-plugins": "/var/lib/kubelet/device-plugins",
                          "pod-resources": "/var/lib/kubelet/pod-resources", "sysfs": "/sys"}
    assert mounts["device-plugins"] == (env["NUMA_SOCKET_DIR"], False)  # the plugin creates its sockets there
    assert mounts["pod-resources"] == ("/var/lib/kubelet/pod-resources", True)
    assert mounts["sysfs"] == (env["NUMA_SYSFS_ROOT"], True) and env["NUMA_SYSFS_ROOT"] == "/host/sys"


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
    assert after["ConfigMap"]["data"]["NUMA_CAPACITY"] == "100"


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
    assert needs_apply(text, Live(live(text).checksum, {**live(text).settings, "NUMA_CAPACITY": "7"}))


def test_the_plugin_asks_no_cpu_so_pinned_pods_can_take_every_allocatable_cpu() -> None:
    (container,) = pod_spec(numa_align_daemonset(IMAGE, SETTINGS))["containers"]
    assert "cpu" not in container["resources"]["requests"] and "cpu" not in container["resources"].get("limits", {})
    assert container["resources"]["requests"]["memory"] == "64Mi"
