"""numa-align's cpuset audit on the lab: its alerting rules loaded by the registry host's Prometheus, and a
pinned container's cpuset changed behind the kubelet's back reported through Prometheus (gauge and alert)
and on the node's NRT object, then put back.

The kubelet's CPU Manager writes a container's cpuset once, and its reconcile loop rewrites it only when
its own assignment changes (it remembers what it last set), so a change made by hand stays: drift.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

from kubernetes import client
from numa_align import nrt_api
from numa_align.audit import ANNOTATION
from numa_align.cpulist import format_cpulist, parse_cpulist

from e2e.prometheus import instant_query
from tests.cluster.faults import NAMESPACE, api, guaranteed_pod, wait
from tests.cluster.guests import ssh
from tests.lab.conftest import BIN

RULES_GROUP = "numa-align-audit"
DRIFT_ALERT = "NumaAlignCpusetDrift"


def rules_loaded(prometheus_url: str) -> list[str]:
    """The names of the numa-align-audit group's rules Prometheus loaded, each asserted healthy."""
    with urllib.request.urlopen(f"{prometheus_url.rstrip('/')}/api/v1/rules", timeout=10) as response:
        groups = json.load(response)["data"]["groups"]
    (group,) = [g for g in groups if g["name"] == RULES_GROUP] or [None]
    assert group is not None, f"Prometheus has no rule group {RULES_GROUP}: {[g['name'] for g in groups]}"
    unhealthy = [(r["name"], r.get("lastError")) for r in group["rules"] if r.get("health") not in ("ok", "unknown")]
    assert not unhealthy, unhealthy
    return [r["name"] for r in group["rules"]]


def _alert_state(prometheus_url: str, name: str, node: str) -> str:
    with urllib.request.urlopen(f"{prometheus_url.rstrip('/')}/api/v1/alerts", timeout=10) as response:
        alerts = json.load(response)["data"]["alerts"]
    states = [a["state"] for a in alerts if a["labels"].get("alertname") == name
              and a["labels"].get("kubernetes_node") == node]
    return states[0] if states else ""


def _audit(custom: client.CustomObjectsApi, node: str) -> dict:
    nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, node)
    return json.loads((nrt["metadata"].get("annotations") or {}).get(ANNOTATION, "{}"))


def explained(state: Path, manifest: dict, node: str) -> dict:
    """`kubectl numa explain - --node NODE --format json` for `manifest`: the node's verdict."""
    env = {**os.environ, "KUBECONFIG": str(state / "kubeconfig")}
    done = subprocess.run([str(BIN / "kubectl-numa"), "explain", "-", "--node", node,
                           "--format", "json"], input=json.dumps(manifest), env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (verdict,) = [v for v in json.loads(done.stdout)["nodes"] if v["node"] == node]
    return verdict


def cpuset_drift(state: Path, prometheus_url: str, node: str, image: str) -> str:
    """A Guaranteed pod's container on `node` moved by hand to a CPU it was not given: numa-align reports the
    drift (gauge read through Prometheus, the alert pending or firing, the NRT annotation naming it), and the
    report clears once the cpuset is put back. Returns a one-line summary with the times."""
    core, custom = client.CoreV1Api(api(state)), client.CustomObjectsApi(api(state))
    name = f"audit-drift-{node}"
    drift = f'numa_align_containers_cpuset_drift{{kubernetes_node="{node}"}}'
    manifest = guaranteed_pod(name, node, image)
    predicted = explained(state, manifest, node)
    assert predicted["verdict"] == "admitted", predicted  # a 1-CPU pod on an idle worker
    core.create_namespaced_pod(NAMESPACE, manifest)
    try:
        wait(f"{name} Running", lambda: core.read_namespaced_pod(name, NAMESPACE).status.phase == "Running", 120)
        container = core.read_namespaced_pod(name, NAMESPACE).status.container_statuses[0].container_id
        scope = f"cri-containerd-{container.split('://', 1)[1]}.scope"
        found = ssh(state, node, f"find /sys/fs/cgroup/kubepods.slice -maxdepth 3 -type d -name {scope}")
        cgroup = found.stdout.strip()
        assert found.returncode == 0 and cgroup, f"no cgroup {scope} on {node}: {found.stderr}"
        given = parse_cpulist(ssh(state, node, f"cat {cgroup}/cpuset.cpus.effective").stdout.strip())
        real = sorted(cell for cell in range(8) if set(given) & set(parse_cpulist(ssh(
            state, node, f"cat /sys/devices/system/node/node{cell}/cpulist 2>/dev/null || true").stdout.strip() or "")))
        print(f"explain {name} on {node}: cpu on cells {predicted['cells'].get('cpu')} predicted, {real} given")
        allowed = parse_cpulist(ssh(state, node, "cat /sys/fs/cgroup/kubepods.slice/cpuset.cpus.effective").stdout)
        other = frozenset(sorted(allowed - given)[:len(given)])
        assert len(other) == len(given), f"{node} has no CPUs besides {given} to move {name} to"
        wait(f"{drift} = 0 before the change (the baseline)", lambda: instant_query(prometheus_url, drift) == 0, 60)

        moved = ssh(state, node, f"echo {format_cpulist(other)} > {cgroup}/cpuset.cpus && "
                                 f"cat {cgroup}/cpuset.cpus.effective")
        assert parse_cpulist(moved.stdout.strip()) == other, moved.stdout + moved.stderr  # the fault took effect
        seen = wait(f"{drift} = 1", lambda: instant_query(prometheus_url, drift) == 1, 60)
        wait(f"{name} named as drifted on {node}'s NRT object",
             lambda: any(name in entry for entry in _audit(custom, node).get("drift", [])), 30)
        alert = wait(f"alert {DRIFT_ALERT} for {node}",
                     lambda: _alert_state(prometheus_url, DRIFT_ALERT, node) in ("pending", "firing"), 60)

        back = ssh(state, node, f"echo {format_cpulist(given)} > {cgroup}/cpuset.cpus")
        assert back.returncode == 0, back.stderr
        cleared = wait(f"{drift} = 0 once put back", lambda: instant_query(prometheus_url, drift) == 0, 60)
    finally:
        core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
    return (f"{name}: CPUs {format_cpulist(given)} moved to {format_cpulist(other)} by hand; drift in Prometheus "
            f"{seen:.0f} s after, alert {alert:.0f} s after that, cleared {cleared:.0f} s after it was put back")
