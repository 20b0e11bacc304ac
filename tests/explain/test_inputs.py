"""What explain reads: manifests (a Pod or a workload's template, nothing else), nodes without current data,
the NUMA-aware scheduler's filter, and the command lines."""

import datetime
import json

import pytest
import yaml

from numalab.cli import main
from numalab.explain import command
from numalab.explain.requests import SpecError, pod_from_documents
from numalab.explain.verdicts import explain
from numalab.lint.workloads import Document
from numalab.top.command import kubectl_main
from tests.explain.cluster import cell, configz, container, node, nrt, pod, pod_spec
from tests.top.fakes import FakeSource, lease

NOW = datetime.datetime(2026, 5, 1, 12, 0, tzinfo=datetime.UTC)


def docs(obj):
    return [Document(obj, None)]


def test_deployment_is_read_through_its_template():
    """The pod template is what the kubelet admits (a Deployment's spec.template.spec)."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"template": {"spec": pod_spec(container("a", cpu="3"))["spec"]}}}
    the_pod = pod_from_documents("web.yaml", docs(deployment))
    assert the_pod.qos == "Guaranteed"
    assert the_pod.containers[0].requests["cpu"] == 3000


def test_configmap_is_refused_by_kind():
    with pytest.raises(SpecError, match="kind 'ConfigMap' carries no pod spec"):
        pod_from_documents("cm.yaml", docs({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))


def test_node_without_nrt_object_is_not_judged():
    """No NodeResourceTopology: nothing to judge from, said so."""
    (verdict,) = explain(pod(container("a")), [], [node("bare")], [])
    assert verdict.verdict == "no-data"
    assert "no NodeResourceTopology" in verdict.reason
    assert verdict.cells == {} and verdict.hints == {}


def test_stale_object_is_not_judged():
    """numa-align's Lease lapsed (numalab.top.liveness): the object may be old, so it is not used."""
    leases = [lease("w", "2026-05-01T11:00:00Z", duration=60)]
    obj = nrt("w", [cell(0, (4, 4, 4))])
    (verdict,) = explain(pod(container("a")), [obj], [node("w")], [], leases, NOW, {"w": configz()})
    assert verdict.verdict == "no-data"
    assert "numa-align stale since 2026-05-01T11:00:00Z" in verdict.reason


@pytest.mark.parametrize(("scope", "expected"), [
    ("pod", "fail: cannot align pod (cpu fits in no single cell)"),
    ("container", "pass: a on cell 0, b on cell 1 (scope container)"),
])
def test_numa_aware_filter_by_scope(scope, expected):
    """scheduler-plugins filter.go singleNUMAPodLevelHandler / singleNUMAContainerLevelHandler on `available`."""
    the_pod = pod(container("a"), container("b"), schedulerName="numa-aware")
    obj = nrt("w", [cell(0, (4, 4, 2)), cell(1, (4, 4, 2))], scope=scope)
    (verdict,) = explain(the_pod, [obj], [node("w")], [], kubelet_configs={"w": configz(scope=scope)})
    assert verdict.numa_aware_filter == expected
    assert verdict.scheduler == "numa-aware (NodeResourceTopologyMatch)"


def test_default_scheduler_is_named():
    (verdict,) = explain(pod(container("a")), [], [node("w")], [])
    assert verdict.scheduler.startswith("default-scheduler")


@pytest.fixture
def served(monkeypatch, tmp_path):
    obj = nrt("w", [cell(0, (4, 4, 1)), cell(1, (4, 4, 3))])
    source = FakeSource([obj], [node("w"), node("bare")], [], None)
    source.kubelet_config = lambda name: configz() if name == "w" else None
    monkeypatch.setattr(command, "open_source", lambda kubeconfig, context: source)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod_spec(container("a"))))
    return manifest


def test_cli_json(served, capsys):
    assert main(["explain", str(served), "--kubeconfig", "k", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_node = {n["node"]: n for n in out["nodes"]}
    assert by_node["w"]["verdict"] == "admitted" and by_node["w"]["cells"]["cpu"] == [1]
    assert by_node["bare"]["verdict"] == "no-data"
    assert set(by_node["w"]) >= {"node", "verdict", "cells", "reason", "hints", "scheduler", "numa_aware_filter"}


def test_kubectl_numa_explain_text_for_one_node(served, capsys):
    assert kubectl_main(["explain", str(served), "--kubeconfig", "k", "--node", "w"]) == 0
    out = capsys.readouterr().out
    assert "w: admitted: cpu on cell 1, memory on cell 1" in out
    assert "bare" not in out


def test_cli_refuses_a_configmap(served, capsys, tmp_path):
    bad = tmp_path / "cm.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    assert main(["explain", str(bad), "--kubeconfig", "k"]) == 2
    assert "kind 'ConfigMap' carries no pod spec" in capsys.readouterr().err
