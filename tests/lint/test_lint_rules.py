"""Every lint rule with a manifest it flags and the fixed manifest it passes, run through the CLI."""

from __future__ import annotations

import json

import pytest

from numalab.cli import main

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: probe, namespace: lab}}
spec:
{init}  containers:
  - name: app
    image: probe
    resources:
      requests: {{cpu: "{cpu}", memory: 64Mi{app_req}}}
      limits: {{cpu: "{cpu}", memory: {mem_limit}{app_lim}}}
"""


def pod(cpu="1", mem_limit="64Mi", app_req="", app_lim=", numa-align/numa-1: 1", init=""):
    return POD.format(cpu=cpu, mem_limit=mem_limit, app_req=app_req, app_lim=app_lim, init=init)


def init_block(limits: str) -> str:
    return (
        "  initContainers:\n"
        "  - name: anchor\n"
        "    image: probe\n"
        f"    resources: {{requests: {{cpu: '1', memory: 64Mi}}, limits: {{cpu: '1', memory: 64Mi{limits}}}}}\n"
    )


TOPOLOGY = """\
worker-a:
  cells:
  - {id: 0, cpus: "0-1", memory: 2Gi}
  - {id: 1, cpus: "2-3", memory: 2Gi}
worker-b:
  cells:
  - {id: 0, cpus: "0", memory: 1Gi}
  - {id: 1, cpus: "1", memory: 1Gi}
  - {id: 2, cpus: "2", memory: 1Gi}
"""

CASES = {
    "not-guaranteed": (pod(mem_limit="128Mi"), pod(), []),
    "fractional-cpu": (pod(cpu="1500m"), pod(cpu="2"), []),
    "numa-align-limits": (pod(app_req=", numa-align/numa-1: 2"), pod(app_req=", numa-align/numa-1: 1"), []),
    "several-nodes": (pod(init=init_block(", numa-align/numa-0: 1")),
                      pod(init=init_block(", numa-align/numa-1: 1")), ["--topology-scope", "pod"]),
    "init-anchor": (pod(init=init_block("")), pod(init=init_block(", numa-align/numa-1: 1")),
                    ["--topology-scope", "container"]),
    "capacity-count": (pod(cpu="2"), pod(cpu="2", app_lim=", numa-align/numa-1: 2"), ["--capacity-mode", "cpus"]),
    "unknown-node": (pod(app_lim=", numa-align/numa-3: 1"), pod(app_lim=", numa-align/numa-2: 1"),
                     ["--topology", "TOPOLOGY"]),
}


def lint(tmp_path, capsys, text, *extra):
    manifest = tmp_path / "workload.yaml"
    manifest.write_text(text)
    topology = tmp_path / "topology.yaml"
    topology.write_text(TOPOLOGY)
    args = [str(topology) if arg == "TOPOLOGY" else arg for arg in extra]
    code = main(["lint", str(manifest), "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else None, err


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_flags_the_failing_manifest(tmp_path, capsys, rule):
    failing, _, extra = CASES[rule]
    code, findings, _ = lint(tmp_path, capsys, failing, *extra)
    assert code == 1
    assert [f["rule"] for f in findings] == [rule]
    assert findings[0]["object"] == "Pod/lab/probe"


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_passes_the_fixed_manifest(tmp_path, capsys, rule):
    _, passing, extra = CASES[rule]
    code, findings, err = lint(tmp_path, capsys, passing, *extra)
    assert (code, findings, err) == (0, [], "")


def test_findings_name_container_and_field(tmp_path, capsys):
    _, findings, _ = lint(tmp_path, capsys, pod(mem_limit="128Mi"))
    assert findings[0]["container"] == "app"
    assert findings[0]["field"] == "spec.containers[0].resources.requests.memory"
    assert findings[0]["document"] == 1


def test_capacity_count_ignored_in_slot_mode(tmp_path, capsys):
    code, findings, _ = lint(tmp_path, capsys, pod(cpu="2"), "--capacity-mode", "slots")
    assert (code, findings) == (0, [])


def test_init_anchor_ignored_with_pod_scope(tmp_path, capsys):
    code, findings, _ = lint(tmp_path, capsys, pod(init=init_block("")), "--topology-scope", "pod")
    assert (code, findings) == (0, [])


def test_workloads_without_numa_align_are_not_judged(tmp_path, capsys):
    code, findings, _ = lint(tmp_path, capsys, pod(cpu="100m", app_lim=""))
    assert (code, findings) == (0, [])


def test_default_scope_is_the_deploys_pod_scope(tmp_path, capsys):
    """numa-lab writes topologyManagerScope pod unless told otherwise, so lint judges that by default:
    an init container without the app's device is fine, one on another node is not."""
    assert lint(tmp_path, capsys, pod(init=init_block("")))[:2] == (0, [])
    code, findings, _ = lint(tmp_path, capsys, pod(init=init_block(", numa-align/numa-0: 1")))
    assert code == 1 and [f["rule"] for f in findings] == ["several-nodes"]
    assert "one node per pod" in findings[0]["message"]


def test_several_nodes_with_container_scope_is_judged_per_container(tmp_path, capsys):
    """With scope container each container is aligned on its own: an init container on node 0 and the
    app on node 1 can both be admitted; one container asking for two nodes never can."""
    apart = pod(init=init_block(", numa-align/numa-0: 1"))
    code, findings, _ = lint(tmp_path, capsys, apart, "--topology-scope", "container")
    assert [f["rule"] for f in findings] == ["init-anchor"]
    both = pod(app_lim=", numa-align/numa-0: 1, numa-align/numa-1: 1")
    code, findings, _ = lint(tmp_path, capsys, both, "--topology-scope", "container")
    assert code == 1 and [(f["rule"], f["container"]) for f in findings] == [("several-nodes", "app")]
    assert "one node per container" in findings[0]["message"]


def numa_aware_pod() -> str:
    return pod(cpu="2", app_lim="").replace("spec:\n", "spec:\n  schedulerName: numa-aware\n", 1)


def test_a_pod_naming_a_scheduler_that_does_not_run_is_reported_any_pod(tmp_path, capsys):
    """Not only numa-align pods: one that opts in to the NUMA-aware scheduler while it is off stays Pending."""
    code, findings, _ = lint(tmp_path, capsys, numa_aware_pod(), "--scheduler", "other")
    assert code == 1 and [(f["rule"], f["field"]) for f in findings] == [("unknown-scheduler", "spec.schedulerName")]
    assert "no scheduler 'numa-aware' runs in the cluster (it runs default-scheduler, other)" in findings[0]["message"]
    assert findings[0]["line"] == 5
    assert lint(tmp_path, capsys, numa_aware_pod(), "--scheduler", "numa-aware")[:2] == (0, [])
    assert lint(tmp_path, capsys, numa_aware_pod())[:2] == (0, [])  # schedulers unknown: not judged


def test_the_running_schedulers_are_learned_from_their_fresh_leases(tmp_path, capsys, monkeypatch):
    import datetime
    from types import SimpleNamespace

    from numalab.lint import cluster_schedulers

    now = datetime.datetime(2026, 11, 25, tzinfo=datetime.UTC)

    def leases(renewed_seconds_ago: float) -> list:
        renewed = now - datetime.timedelta(seconds=renewed_seconds_ago)
        return [SimpleNamespace(metadata=SimpleNamespace(name="numa-scheduler"),
                                spec=SimpleNamespace(renew_time=renewed))]

    class Api:
        items: list = []

        def __init__(self, _client):
            pass

        def list_namespaced_lease(self, namespace, _request_timeout):
            return SimpleNamespace(items=Api.items)

    monkeypatch.setattr(cluster_schedulers.client, "CoordinationV1Api", Api)
    monkeypatch.setattr(cluster_schedulers.config, "new_client_from_config", lambda config_file: None)
    Api.items = leases(5)
    assert cluster_schedulers.running_schedulers(tmp_path / "kubeconfig", now) == {"numa-aware"}
    Api.items = leases(600)  # stopped ten minutes ago
    assert cluster_schedulers.running_schedulers(tmp_path / "kubeconfig", now) == frozenset()


def test_an_unreachable_cluster_is_a_usage_error(tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n"
                          "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                          "users: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    manifest = tmp_path / "workload.yaml"
    manifest.write_text(numa_aware_pod())
    assert main(["lint", str(manifest), "--kubeconfig", str(kubeconfig)]) == 2
    assert "cannot list Leases in kube-system" in capsys.readouterr().err
