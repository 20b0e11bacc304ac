"""What the cluster test asks of the live lab after its steps: the kubelets' /configz and allocatable, the NRT
objects, `kubectl numa`, the real-server worker (worker-3), the Go daemons' environment, numa-align's install."""

from __future__ import annotations

import json
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
from kubernetes import client, config
from numa_align import nrt_api

from numalab.lab.spec import Lab
from tests.cluster.guests import ssh
from tests.lab.conftest import BIN

WORKERS = ("worker-1", "worker-3")


def configz(state: Path, node: str) -> dict:
    api = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
    raw = api.connect_get_node_proxy_with_path(node, "configz", _preload_content=False).data
    return json.loads(raw)["kubeletconfig"]


def allocatable(state: Path, node: str) -> dict:
    api = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
    return api.read_node(node).status.allocatable


def nrt_zones(state: Path, node: str) -> dict[str, dict[str, int]]:
    """The node's NodeResourceTopology zones as {zone: {resource: allocatable}}, asked until published."""
    custom = client.CustomObjectsApi(config.new_client_from_config(str(state / "kubeconfig")))
    for _ in range(30):
        try:
            nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, node)
            break
        except client.ApiException as exc:
            assert exc.status == 404, exc
            time.sleep(2)
    else:
        raise AssertionError(f"no NodeResourceTopology for {node} 60 s after the deploy")
    attributes = {a["name"]: a["value"] for a in nrt["attributes"]}
    assert attributes["topologyManagerPolicy"] == "single-numa-node", attributes
    assert attributes["topologyManagerScope"] == "pod", attributes
    assert nrt["metadata"]["ownerReferences"][0]["kind"] == "Node", nrt["metadata"]
    return {z["name"]: {r["name"]: int(r["allocatable"]) for r in z["resources"]} for z in nrt["zones"]}


def check_top(state: Path, env: dict[str, str], page: Path) -> None:
    """`kubectl numa` (numalab top) on the lab: every worker's cells from its NRT object, no warning, a page."""
    env = {**env, "KUBECONFIG": str(state / "kubeconfig")}
    done = subprocess.run([str(BIN / "kubectl-numa"), "--format", "json", "--html", str(page)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = {node["name"]: node for node in json.loads(done.stdout)["nodes"]}
    assert sorted(nodes) == list(WORKERS), sorted(nodes)
    for name in WORKERS:
        assert nodes[name]["nrt"] and nodes[name]["warnings"] == [], nodes[name]
    cells = {cell["zone"]: cell for cell in nodes["worker-3"]["cells"]}
    assert cells["node-2"]["memory_only"] and cells["node-2"]["cpu"] is None, cells["node-2"]
    assert cells["node-0"]["cpu"]["allocatable"] == 2, cells["node-0"]
    assert "<svg" in page.read_text()


def assert_nrt_rows(table: str) -> None:
    """the e2e NRT case passed for every worker x NUMA node with CPUs: the zone showed its pinned pod taken."""
    for worker in WORKERS:
        for node in (0, 1):
            row = next(line.split() for line in table.splitlines() if line.split()[:3] == [worker, str(node), "nrt"])
            assert row[3] == "pass", row


EXPLAIN_PAIRS_AT_LEAST = 30
"""Issue 27: at least 30 (pod, node state) pairs, each explained and then judged by the real kubelet."""


def assert_explain_agreement(table: str) -> str:
    """The e2e run's explain-vs-kubelet line says every pair agreed, over at least EXPLAIN_PAIRS_AT_LEAST pairs
    with a row each; returns the line for the summary."""
    line = next((line.strip() for line in table.splitlines() if line.startswith("explain vs kubelet: ")), None)
    assert line is not None, "the e2e run printed no explain-vs-kubelet line"
    agreed, pairs = (int(n) for n in line.split(": ", 1)[1].split()[0].split("/"))
    rows = [cells for cells in map(str.split, table.splitlines()) if len(cells) > 3 and cells[2].startswith("explain:")]
    assert pairs >= EXPLAIN_PAIRS_AT_LEAST and len(rows) == pairs, (line, len(rows))
    assert agreed == pairs and all(row[3] == "pass" for row in rows), [" ".join(r) for r in rows if r[3] != "pass"]
    return line


def assert_closest_pairs(table: str, worker: str) -> str:
    """The e2e run on the 4-cell worker: its `explain:closest-*` rows all agree, and the kubelet's cells differ
    from those of the setting each pair is there to tell apart: closest-pair from the lowest equally wide pair
    (what the kubelet takes without prefer-closest-numa-nodes), closest-containers from the closest pair (what
    scope pod gives). Otherwise the pair shows nothing of the setting. Returns a line for the summary."""
    rows = [line for line in table.splitlines() if line.split()[:1] == [worker] and len(line.split()) > 3
            and line.split()[2].startswith("explain:closest")]
    failing = [row for row in rows if row.split()[3] != "pass"]
    assert not failing, "\n".join(failing)
    said = []
    for name, setting in (("closest-pair", "without prefer-closest-numa-nodes"),
                          ("closest-containers", "under topology-manager-scope pod")):
        row = next((row for row in rows if row.split()[2] == f"explain:{name}"), None)
        assert row is not None, f"no explain:{name} row for {worker}:\n" + "\n".join(rows or [table[-3000:]])
        took = re.search(r"kubelet admitted cpu ([\d,]+)", row)
        other = re.search(rf"{setting}: cpu ([\d,]+)", row)
        assert took and other and took.group(1) != other.group(1), row
        said.append(f"{name} got cells {took.group(1)} as explain said ({setting}: {other.group(1)})")
    return (f"explain vs kubelet on 4-cell {worker} (restricted, prefer-closest-numa-nodes, scope container): "
            f"{len(rows)}/{len(rows)} pairs agree; " + "; ".join(said))


def check_real_server_worker(state: Path, env: dict[str, str], inventory: Path) -> None:
    """worker-3 on the real kubelet: what it accepted, as /configz, the API and the guest's sysfs show."""
    kubelet = configz(state, "worker-3")
    assert kubelet["reservedSystemCPUs"] == "0-1"  # the whole first core, not cpu 0 alone
    assert kubelet["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
    assert kubelet["cpuManagerPolicy"] == "static" and kubelet["memoryManagerPolicy"] == "Static"
    assert kubelet["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
    resources = allocatable(state, "worker-3")
    assert resources["numa-align/numa-0"] == "100" and resources["numa-align/numa-1"] == "100"
    assert "numa-align/numa-2" not in resources  # the memory-only cell is never a device
    assert resources["hugepages-2Mi"] == "64Mi"
    assert ssh(state, "worker-3", "cat /sys/devices/system/cpu/online").stdout.strip() == "0-5"
    zones = nrt_zones(state, "worker-3")  # the memory-only cell is a zone with memory and no CPUs
    assert sorted(zones) == ["node-0", "node-1", "node-2"], zones
    assert "cpu" not in zones["node-2"] and zones["node-2"]["memory"] > 0, zones
    assert zones["node-0"]["cpu"] == 2 and zones["node-1"]["cpu"] == 2, zones  # allocatable: 0-1 reserved
    assert ssh(state, "worker-3", "cat /sys/devices/system/node/node2/cpulist").stdout.strip() == ""
    preflight = subprocess.run([str(BIN / "numalab"), "preflight", str(inventory), "--format", "json"],
                               env=env, capture_output=True, text=True, timeout=600)
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    report = {entry["host"]: entry for entry in json.loads(preflight.stdout)}
    assert sorted(report) == list(WORKERS)
    shape = report["worker-3"]
    assert shape["threads_per_core"] == 2 and shape["offline_cpus"] == "6-7" and shape["memory_only_nodes"] == [2]
    assert shape["hugepages"] == {"0": {"2Mi": 32}} and shape["cgroup_version"] == 2
    assert "reserved-cpus=0-1" in shape["kubelet_args"]


def check_go_environment(state: Path, lab: Lab) -> None:
    """Go daemons run with one P where the guest is emulated in software (context.go_environment), as their
    processes' environment shows; Go's default (no GOMAXPROCS) on a guest with hardware virtualization. The
    guest's own word (systemd-detect-virt) must match how libvirt runs it (domain type qemu: TCG)."""
    conn = libvirt.open(lab.settings.uri)
    try:
        types = {name: ET.fromstring(conn.lookupByName(lab.domain_name(lab.guest(name))).XMLDesc(0)).get("type")
                 for name in ("server", "worker-1")}
    finally:
        conn.close()
    for guest, daemons in (("server", ("kube-apiserver", "etcd")), ("worker-1", ("kubelet", "containerd"))):
        emulated = ssh(state, guest, "systemd-detect-virt --vm || true").stdout.strip() == "qemu"
        assert emulated == (types[guest] == "qemu"), (guest, types[guest])
        for daemon in daemons:
            environ = f"tr '\\0' '\\n' < /proc/$(pidof -s {daemon})/environ | grep '^GOMAXPROCS=' || true"
            seen = ssh(state, guest, environ)
            assert seen.stdout.strip() == ("GOMAXPROCS=1" if emulated else ""), (guest, daemon, seen.stdout)


def check_numa_align(state: Path, install: str) -> None:
    """numa-align runs one way only on every worker: the unit or a DaemonSet pod, never both, nothing left of
    the other, its sockets beside the kubelet's, and its devices allocatable (it registered)."""
    api = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
    pods = api.list_namespaced_pod("kube-system", label_selector="app.kubernetes.io/name=numa-align").items
    for worker in WORKERS:
        unit = ssh(state, worker, "systemctl is-active numa-align; test -e /etc/systemd/system/numa-align.service "
                                  "&& echo unit-file; test -e /opt/numa-align && echo venv; true").stdout.split()
        # the deploy's verify saw the devices allocatable; the sockets are the plugin's own, asked until there
        sockets = ssh(state, worker, "for i in $(seq 30); do ls /var/lib/kubelet/device-plugins | grep -q numa-1 "
                                     "&& break; sleep 2; done; ls /var/lib/kubelet/device-plugins").stdout.split()
        on_worker = [pod for pod in pods if pod.spec.node_name == worker]
        if install == "systemd":
            assert unit == ["active", "unit-file", "venv"] and on_worker == [], (worker, unit, on_worker)
        else:
            # a unit that was stopped cleanly is inactive; failed means its stop failed or timed out
            assert unit == ["inactive"] or unit == ["unknown"], (worker, unit, ssh(
                state, worker, "systemctl show numa-align -p Result -p ExecMainStatus; "
                               "journalctl -u numa-align -n 15 -o short-precise --no-pager").stdout)
            assert [pod.status.phase for pod in on_worker] == ["Running"], (worker, on_worker)
        # one socket per NUMA node with CPUs (worker-3's memory-only node 2 has none; worker-1 re-cut has four),
        # each one plugin's
        with_cpus = ssh(state, worker, "cd /sys/devices/system/node && for n in node[0-9]*; do "
                                       "[ -n \"$(cat $n/cpulist)\" ] && echo ${n#node}; done").stdout.split()
        assert with_cpus and sorted(sockets) == sorted(["kubelet.sock", "kubelet_internal_checkpoint",
                                                        *(f"numa-{n}.sock" for n in with_cpus)]), (worker, sockets)
        # The node's status follows a new registration within its next status update: asked until then.
        seen = allocatable(state, worker).get("numa-align/numa-0")
        for _ in range(45):
            if seen == "100":
                break
            time.sleep(2)
            seen = allocatable(state, worker).get("numa-align/numa-0")
        assert seen == "100", (worker, seen)


def assert_suite_rows(table: str) -> None:
    """The e2e table's whole-cluster rows: case 9's two sides and its Deployment, whole cores, Services and DNS."""
    for row in ("default-scheduler", "numa-aware"):  # both sides: the baseline's rejections happened
        side = next(line.split() for line in table.splitlines()
                    if line.split()[:3] == ["*", "*", f"numa-scheduler:{row}"])
        assert side[3] == "pass", side
    deployment = next(line.split() for line in table.splitlines()
                      if line.split()[:3] == ["*", "*", "numa-scheduler:deployment"])
    assert deployment[3] == "pass", deployment  # a Deployment past what fits: no rejection loop
    assert not any(line.split()[:2] == ["worker-3", "2"] for line in table.splitlines())
    # full-pcpus-only on the real kubelet: pinned pods got whole cores (above), part of a core is refused
    split = next(line.split() for line in table.splitlines() if line.split()[:3] == ["worker-3", "0", "whole-core"])
    assert split[3] == "pass" and "SMTAlignmentError" in " ".join(split), split
    # Services and cluster DNS: worker-1 reached a Service backed by worker-3 by its DNS name (kube-proxy, CoreDNS)
    dns = next(line.split() for line in table.splitlines() if line.split()[:3] == ["worker-1", "*", "service-dns"])
    assert dns[3] == "pass" and "worker-3" in dns, dns
