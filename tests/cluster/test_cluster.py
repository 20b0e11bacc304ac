"""The real cluster: the default lab's registry, server and worker-1 (2 cells) running upstream Kubernetes,
with worker-3 in place of the default lab's worker-2 (worker-1's twin; one guest fewer on CI's 2 cores),
shaped like a real server (2 threads per core, a whole core offline, a memory-only node, hugepages) under
full-pcpus-only, on which the real kubelet shows what it accepts: the computed policy, whole-core
reservations, pinned pods on whole cores of cells with CPUs, part of a core refused, and no numa-align
device for the memory-only cell.

One test, because every step needs the one before: build or reuse the binaries, bring the lab up and
deploy every stage through the real pyinfra CLI, run the e2e suite against it (pods pinned, both
Cpus_allowed_list and Mems_allowed_list narrowed to node N, a Service reached by its DNS name), inspect a
worker's kubelet; then one run changes the Memory Manager policy (a reset, one node at a time) and moves
numa-align from its systemd unit to its DaemonSet (the lab registry's image), pinned pods pass under both;
a deploy changes nothing (every stage is idempotent and the reset is not done again); numa-align goes back
to its unit; destroy.
Slow (24 to 30 minutes with cached binaries and images on 2 cores; `make test` runs its other tests beside it);
marked `cluster` and run in CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
import pytest
import yaml
from kubernetes import client, config

from numalab.lab.spec import Lab
from tests.cluster.guests import guest_history, ssh
from tests.cluster.per_node import check_daemonset_per_node
from tests.cluster.steps import note_deploy, note_durations, note_outages, note_rows, step
from tests.cluster.timed_run import run_timed
from tests.lab.conftest import (
    BIN,
    CLUSTER_SUBNET_OFFSETS,
    REPO,
    free_subnet,
    lab_env,
    lab_of_inventory_with_env,
    leftovers,
    run_numalab,
)
from tests.lab.shapes import CLUSTER_WORKER_NUMA

pytestmark = [pytest.mark.lab, pytest.mark.cluster]
DEPLOY = str(REPO / "deploys" / "cluster.py")


def results_row(output: str, label: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.strip().startswith(label))
    return line.split()[-4:]


def failed_run(output: str) -> str:
    """What a failed pyinfra run said: its error lines first (the summary table would push them out of the
    tail), then the tail."""
    errors = [line for line in output.splitlines()
              if re.search(r"\] Error|rror:|not ready|Traceback|numa-lab: .* (failed|refused)", line)]
    return "\n".join(["errors:", *errors[:40], "tail:", output[-4000:]])


def changes(run: subprocess.CompletedProcess[str]) -> str:
    """The Grand total's Success column: '-' when no operation changed anything."""
    return results_row(run.stdout + run.stderr, "Grand total")[1]


WORKER_3 = {"name": "worker-3", "groups": ["rke2_agents"], "numa": CLUSTER_WORKER_NUMA}
WORKER_3_SETTINGS = {"cpu-manager-policy-options": {"full-pcpus-only": "true"}}
WORKERS = ("worker-1", "worker-3")
# inventories/kvm.py's lab without its worker-2 (worker-1's twin): worker-3 is the second worker.
WITHOUT_WORKER_2 = textwrap.dedent("""
    _lab = lab_from_dict({"settings": _settings, "guests": [g for g in _GUESTS if g["name"] != "worker-2"]
                                                           + extra_guests(os.environ)})
    _groups = pyinfra_groups(_lab)
    lab_guests, registry = _groups["lab_guests"], _groups["registry"]
    rke2_servers, rke2_agents = _groups["rke2_servers"], _groups["rke2_agents"]
    """)


def write_inventory(path: Path, memory_policy: str | None = None, numa_align_install: str | None = None) -> Path:
    """inventories/kvm.py with worker-3's CPU Manager options, and maybe the workers' Memory Manager policy
    and numa-align's install (systemd by default, or daemonset: the lab registry's image)."""
    override = textwrap.dedent(f"""
        for _name, _data in rke2_agents:
            _data["kubelet_settings"] = {WORKER_3_SETTINGS!r} if _data["kvm_guest"] == "worker-3" else {{}}
        """)
    if memory_policy is not None:
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                _data["kubelet_settings"]["memory-manager-policy"] = {memory_policy!r}
            """)
    if numa_align_install is not None:
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                _data["numa_align_install"] = {numa_align_install!r}
            """)
    path.write_text(f"exec(open({str(REPO / 'inventories' / 'kvm.py')!r}).read())\n{WITHOUT_WORKER_2}{override}")
    return path


def deploy(inventory: Path, env: dict[str, str], label: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """deploys/cluster.py on the lab, timed line by line: its phases and slowest operations go to the summary,
    its output (times in front) to LABEL.log beside the inventory, kept with pytest's tmp dirs."""
    timed = run_timed([str(BIN / "pyinfra"), "-y", str(inventory), DEPLOY], env, inventory.parent, timeout,
                      inventory.parent / f"{label}.log")
    note_deploy(label, timed.phases(), timed.slowest_operations())
    return timed.completed


def e2e(state: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**env, "KUBECONFIG": str(state / "kubeconfig"), "NUMALAB_SSH_CONFIG": str(state / "ssh_config")}
    return subprocess.run([str(BIN / "pytest"), "e2e", "-p", "no:cacheprovider", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=2400)


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
            nrt = custom.get_cluster_custom_object("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", node)
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
        # one socket per NUMA node with CPUs (worker-3's memory-only node 2 has none), each one plugin's
        assert sorted(sockets) == ["kubelet.sock", "kubelet_internal_checkpoint", "numa-0.sock", "numa-1.sock"], (
            worker, sockets)
        # The node's status follows a new registration within its next status update: asked until then.
        seen = allocatable(state, worker).get("numa-align/numa-0")
        for _ in range(45):
            if seen == "100":
                break
            time.sleep(2)
            seen = allocatable(state, worker).get("numa-align/numa-0")
        assert seen == "100", (worker, seen)


def test_default_lab_runs_upstream_kubernetes_with_pods_pinned(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = lab_env(f"pytest-cluster-{os.getpid()}", state, free_subnet(CLUSTER_SUBNET_OFFSETS))
    env["NUMALAB_DISTRIBUTION"] = "upstream"
    extra = tmp_path / "extra-guests.yaml"
    extra.write_text(yaml.safe_dump([WORKER_3]))
    env["NUMALAB_EXTRA_GUESTS"] = str(extra)
    inventory = write_inventory(tmp_path / "inventory.py")
    lab = lab_of_inventory_with_env(inventory, env)
    prometheus_url = f"http://{lab.guest('registry').address}:9090"  # the metrics stage's Prometheus
    try:
        with step("first deploy (lab up, build or cache, every stage)"):
            first = deploy(inventory, env, "first", timeout=2400)
        output = first.stdout + first.stderr
        assert first.returncode == 0, failed_run(output)
        assert "Kubernetes distribution: upstream" in output
        assert "Wait for Prometheus /-/ready" in output
        for worker in WORKERS:
            assert (f"verify {worker}: numa-align/numa-0=100 numa-align/numa-1=100 | cpu static, memory Static, "
                    "topology single-numa-node/pod") in output
        assert (state / "kubeconfig").stat().st_mode & 0o777 == 0o600
        assert ssh(state, "worker-1", "/usr/local/bin/kubelet --version").stdout.strip() == "Kubernetes v1.36.3"
        # The lab image trusts the cluster CA alone (numalab/lab/recipe.py), and numa-align's venv has no pip.
        bundle = ssh(state, "worker-1", "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt")
        assert bundle.stdout.strip() == "1", bundle.stdout + bundle.stderr
        venv = ssh(state, "worker-1",
                   "test -x /opt/numa-align/venv/bin/numa-align && test ! -e /opt/numa-align/venv/bin/pip")
        assert venv.returncode == 0, venv.stderr
        check_go_environment(state, lab)
        with step("worker-3 checks and preflight"):
            check_real_server_worker(state, env, inventory)
            check_top(state, env, tmp_path / "top.html")

        with step("e2e suite"):
            suite = e2e(state, env, "--durations=8", "--prometheus-url", prometheus_url)
        note_durations("e2e", suite.stdout)
        note_outages(suite.stdout)  # an API server restart the cases waited out is shown, never hidden
        table = suite.stdout + suite.stderr
        history = guest_history(state, WORKERS)
        print(history)  # shown with any failure below; NRestarts=0 means no kubelet or control plane crashed
        assert suite.returncode == 0, table[-8000:] + history
        for worker in WORKERS:
            for node in (0, 1):
                row = next(line.split() for line in table.splitlines()
                           if line.split()[:3] == [worker, str(node), "pinned"])
                assert row[3] == "pass" and row[5] == str(node), row  # Mems_allowed_list is node N
        assert_nrt_rows(table)  # numa-align's NodeResourceTopology counted each pinned pod (its unit's user)
        for worker in WORKERS:  # numa-align's per-cell gauge, read back through the registry host's Prometheus
            for node in (0, 1):
                row = next(line.split() for line in table.splitlines()
                           if line.split()[:3] == [worker, str(node), "prometheus"])
                assert row[3] == "pass", row
        # Side by side: the default scheduler's pods rejected by the kubelets, the NUMA-aware one's never
        note_rows(table, "numa-scheduler")
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

        inspected = ssh(state, "worker-1", "numa-align inspect --format json")
        assert inspected.returncode == 0, inspected.stderr
        report = json.loads(inspected.stdout)
        assert report["memory_manager"]["policy"] == "Static" and report["memory_manager"]["managed"]

        # Memory Manager None, and numa-align from its unit to the DaemonSet (the lab registry's image) in the
        # same run: the stale memory_manager_state is removed once; the run after changes nothing.
        none_inventory = write_inventory(tmp_path / "inventory-none.py", memory_policy="None",
                                         numa_align_install="daemonset")
        with step("Memory Manager None reset, numa-align to its DaemonSet"):
            reset = deploy(none_inventory, env, "reset", timeout=1800)
        reset_output = reset.stdout + reset.stderr
        assert reset.returncode == 0, failed_run(reset_output)
        assert "Remove /var/lib/kubelet/memory_manager_state" in reset_output
        assert "memory None" in reset_output
        assert "Apply the numa-align DaemonSet" in reset_output
        check_numa_align(state, "daemonset")
        check_daemonset_per_node(config.new_client_from_config(str(state / "kubeconfig")), WORKERS,
                                 lambda node: configz(state, node))
        # One node at a time: each worker's reset ends (uncordon) before the next one's drain starts.
        marks = [reset_output.index(f"{action} {worker}") for worker in WORKERS
                 for action in ("Drain", "Uncordon")]
        assert marks == sorted(marks), marks
        memory_state = json.loads(ssh(state, "worker-3", "cat /var/lib/kubelet/memory_manager_state").stdout)
        assert memory_state["policyName"] == "None", memory_state
        with step("e2e pinned pods under None, numa-align as a DaemonSet"):
            pinned = e2e(state, env, "e2e/test_1_pinned.py", "-k", "pinned_pod", "--expect-memory-policy", "None")
        note_outages(pinned.stdout)
        assert pinned.returncode == 0, (pinned.stdout + pinned.stderr)[-6000:] + guest_history(state, WORKERS)
        assert "not enforced by this kubelet" in pinned.stdout + pinned.stderr
        assert_nrt_rows(pinned.stdout)  # ... and under the DaemonSet (its ServiceAccount's token)
        # The second run of the deploy changes nothing: every stage is idempotent, and the reset happened once.
        with step("second deploy (no changes)"):
            again = deploy(none_inventory, env, "again", timeout=1800)
        assert again.returncode == 0, failed_run(again.stdout + again.stderr)
        assert changes(again) == "-", "the second run changed something: " + (again.stdout + again.stderr)[-4000:]
        # Back to the unit: the DaemonSet and its pods go first, the unit registers again.
        systemd_inventory = write_inventory(tmp_path / "inventory-systemd.py", memory_policy="None")
        with step("numa-align back to its systemd unit"):
            back = deploy(systemd_inventory, env, "back", timeout=1800)
        back_output = back.stdout + back.stderr
        assert back.returncode == 0, failed_run(back_output)
        assert "Remove the numa-align DaemonSet first" in back_output
        check_numa_align(state, "systemd")
    finally:
        with step("destroy"):
            destroyed = run_numalab(inventory, env, "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert leftovers(lab) == []
