"""The plugin's systemd unit and DaemonSet manifests render, parse, and name the right paths."""

from __future__ import annotations

import yaml

from numalab.render import render

SOCKET_DIR = "/var/lib/kubelet/device-plugins"
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
ENV = {"NUMA_CAPACITY": "cpus", "NUMA_RESERVED_CPUS": "0,32", "NUMA_METRICS_ADDR": ":9201", "NUMA_LOG_LEVEL": "info"}
CONFIG = {"nodes.json": '{\n"worker-1": {"NUMA_RESERVED_CPUS": "0,32"}\n}\n'}


def render_daemonset(**changes) -> dict[str, dict]:
    values = {
        "namespace": "kube-system", "image": "registry.local:5000/numa-align:0.1.0",
        "image_pull_policy": "IfNotPresent", "socket_dir": SOCKET_DIR, "pod_resources_dir": POD_RESOURCES_DIR,
        "sysfs_dir": "/sys", "guard_dir": "/var/lib/numa-lab", "config": CONFIG,
        "node_settings_dir": "/etc/numa-align/nodes", "node_settings_file": "nodes.json", "metrics_port": 9201,
        "node_selector": {"numa-lab/numa": "true"},
        "settings_checksum": "s" * 64, "manifest_checksum": "m" * 64, "nrt": False,
    } | changes
    documents = list(yaml.safe_load_all(render("plugin/daemonset.yaml.j2", **values)))
    return {doc["kind"]: doc for doc in documents}


def test_daemonset_mounts_the_device_plugins_dir_and_sysfs_at_the_paths_it_passes():
    docs = render_daemonset()
    assert sorted(docs) == ["ConfigMap", "DaemonSet", "ServiceAccount"]
    assert docs["ConfigMap"]["data"] == CONFIG  # the file as it is, new lines and quotes included
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"] == "numa-align"
    assert pod["nodeSelector"] == {"numa-lab/numa": "true"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]} and security["readOnlyRootFilesystem"] is True
    assert "envFrom" not in container  # the node's settings come from its entry of the mounted file
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert env["NUMA_ALIGN_NODE_SETTINGS"] == "/etc/numa-align/nodes/nodes.json"
    assert {"name": "node-settings", "configMap": {"name": "numa-align"}} in pod["volumes"]
    assert pod["automountServiceAccountToken"] is False  # no NRT: no API access
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    assert volumes["device-plugins"] == {"path": SOCKET_DIR, "type": "Directory"}
    assert mounts["device-plugins"]["mountPath"] == env["NUMA_SOCKET_DIR"] == SOCKET_DIR
    assert volumes["pod-resources"] == {"path": POD_RESOURCES_DIR, "type": "Directory"}
    assert mounts["pod-resources"] == {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True}
    assert volumes["sysfs"]["path"] == "/sys"
    assert mounts["sysfs"]["mountPath"] == env["NUMA_SYSFS_ROOT"] and mounts["sysfs"]["readOnly"] is True
    assert volumes["guard-record"] == {"path": "/var/lib/numa-lab", "type": "DirectoryOrCreate"}
    assert mounts["guard-record"] == {"name": "guard-record", "mountPath": "/var/lib/numa-lab", "readOnly": True}
    assert container["ports"] == [{"name": "metrics", "containerPort": 9201, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert docs["DaemonSet"]["metadata"]["annotations"] == {"numa-lab/manifest-sha256": "m" * 64}
    assert docs["DaemonSet"]["spec"]["template"]["metadata"]["annotations"] == {"numa-lab/settings-sha256": "s" * 64}
    labels = docs["DaemonSet"]["spec"]["selector"]["matchLabels"]
    assert docs["DaemonSet"]["spec"]["template"]["metadata"]["labels"] == labels


def test_daemonset_without_metrics_or_node_selector():
    pod = render_daemonset(metrics_port=None, node_selector={})["DaemonSet"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod
    assert "ports" not in pod["containers"][0] and "readinessProbe" not in pod["containers"][0]


def test_daemonset_publishing_nrt_gets_its_token_and_every_pod_its_node_name():
    pod = render_daemonset(nrt=True)["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True and pod["serviceAccountName"] == "numa-align"
    env = {item["name"]: item for item in pod["containers"][0]["env"]}
    assert env["NODE_NAME"] == {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def test_systemd_unit_runs_the_plugin_with_its_environment():
    text = render(
        "plugin/numa-align.service.j2",
        exec_start="/opt/numa-align/bin/numa-align serve",
        env={"NUMA_SOCKET_DIR": SOCKET_DIR, "NUMA_CAPACITY": "100", "NUMA_LOG_LEVEL": "100%"},
    )
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections[current] = []
        elif line and not line.startswith("#"):
            key, _, value = line.partition("=")
            sections[current].append((key, value))
    assert list(sections) == ["Unit", "Service", "Install"]
    service = sections["Service"]
    assert ("ExecStart", "/opt/numa-align/bin/numa-align serve") in service
    assert [value for key, value in service if key == "Environment"] == [
        '"NUMA_CAPACITY=100"', '"NUMA_LOG_LEVEL=100%%"', f'"NUMA_SOCKET_DIR={SOCKET_DIR}"'
    ]
    assert ("KillSignal", "SIGTERM") in service and ("Restart", "always") in service
    assert ("WantedBy", "multi-user.target") in sections["Install"]
