"""The policy-change reset: which state files a new kubelet config makes stale (from the config texts), which
pods a drain evicts, which budget holds one back, and how a reset ends, also after a failed run."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client

from numalab.deploy import draining, policy_reset
from numalab.deploy.node import kubelet_config_text
from numalab.deploy.policy_reset import plan
from numalab.model import components
from numalab.model.cluster import cluster_from_groups
from numalab.model.kubelet import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    KubeletSettings,
    kubelet_policy,
)
from numalab.model.node_reset import (
    CORDONED,
    KEPT,
    MARK,
    MIRROR,
    DrainOptions,
    ResetError,
    blocked_message,
    budgets_of,
    holder,
    mark_patch,
    pods_to_evict,
    release_patch,
    release_planned,
)
from numalab.model.topology import Topology

CLUSTER = cluster_from_groups("t", {"rke2_servers": [("server", "10.77.0.10", {})],
                                    "rke2_agents": [("worker-a", "10.77.0.11", {})]})
TWO_CELLS = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
)


def config_text(**settings) -> str:
    """The config file the node stage writes for these kubelet_settings."""
    policy = kubelet_policy(TWO_CELLS, KubeletSettings.from_dict(settings))
    return kubelet_config_text(CLUSTER, policy)


DEFAULT = config_text()


def test_the_default_config_is_static_for_both_managers() -> None:
    config = yaml.safe_load(DEFAULT)
    assert (config["cpuManagerPolicy"], config["memoryManagerPolicy"]) == ("static", "Static")


@pytest.mark.parametrize("previous", ["", "\n  \n"], ids=["absent", "blank"])
def test_first_install_removes_nothing(previous: str) -> None:
    assert plan(previous, DEFAULT) == []


def test_an_unchanged_config_removes_nothing() -> None:
    assert plan(DEFAULT, DEFAULT) == []
    assert plan(DEFAULT, config_text()) == []


@pytest.mark.parametrize(
    "previous",
    ["cpuManagerPolicy: [static\n", "just some text", "- a list\n- of things\n", "42"],
    ids=["broken yaml", "a string", "a list", "a number"],
)
def test_a_file_numa_lab_did_not_write_removes_nothing(previous: str) -> None:
    assert plan(previous, DEFAULT) == []


def test_a_memory_policy_change_removes_the_memory_checkpoint() -> None:
    no_memory_manager = config_text(**{"memory-manager-policy": "None"})
    assert plan(DEFAULT, no_memory_manager) == [MEMORY_MANAGER_STATE]
    assert plan(no_memory_manager, DEFAULT) == [MEMORY_MANAGER_STATE]


def test_a_reserved_memory_change_under_static_removes_the_memory_checkpoint() -> None:
    more = config_text(**{"system-reserved": {"cpu": "500m", "memory": "1Gi"}})
    assert yaml.safe_load(more)["reservedMemory"] != yaml.safe_load(DEFAULT)["reservedMemory"]
    assert plan(DEFAULT, more) == [MEMORY_MANAGER_STATE]


def test_a_reserved_memory_change_without_the_memory_manager_removes_nothing() -> None:
    before = config_text(**{"memory-manager-policy": "None"})
    after = config_text(**{"memory-manager-policy": "None", "system-reserved": {"cpu": "500m", "memory": "1Gi"}})
    assert before != after
    assert plan(before, after) == []


def test_a_cpu_policy_change_removes_the_cpu_checkpoint() -> None:
    assert plan(DEFAULT, config_text(**{"cpu-manager-policy": "none"})) == [CPU_MANAGER_STATE]


def test_both_policies_changed_remove_both_checkpoints() -> None:
    neither = config_text(**{"cpu-manager-policy": "none", "memory-manager-policy": "None"})
    assert plan(DEFAULT, neither) == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]


def test_a_topology_manager_change_removes_nothing() -> None:
    assert plan(DEFAULT, config_text(**{"topology-manager-policy": "best-effort"})) == []


def test_a_config_written_without_managers_counts_as_the_kubelet_defaults() -> None:
    """A kubelet config from before numa-lab set policies: the kubelet's defaults (none/None) were in force."""
    bare = yaml.safe_dump(components.kubelet_configuration(CLUSTER, {}))
    assert plan(bare, DEFAULT) == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert plan(bare, config_text(**{"cpu-manager-policy": "none", "memory-manager-policy": "None"})) == []


# The rules of the reset itself (numalab.model.node_reset), on the client's own models.

def v1_node(name: str, ready: bool = True, unschedulable: bool = False, mark: str | None = None) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, annotations={MARK: mark} if mark else None),
        spec=client.V1NodeSpec(unschedulable=unschedulable),
        status=client.V1NodeStatus(conditions=[client.V1NodeCondition(type="Ready", status=str(ready))]),
    )


def v1_pod(name: str, labels: dict | None = None, owner: str | None = None, mirror: bool = False) -> client.V1Pod:
    refs = [client.V1OwnerReference(api_version="apps/v1", kind=owner, name="x", uid="u", controller=True)
            ] if owner else None
    annotations = {MIRROR: "hash"} if mirror else None
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, namespace="apps", labels=labels,
                                                     owner_references=refs, annotations=annotations))


def budget(name: str, selector: client.V1LabelSelector | None, namespace: str = "apps"):
    return client.V1PodDisruptionBudget(metadata=client.V1ObjectMeta(name=name, namespace=namespace),
                                        spec=client.V1PodDisruptionBudgetSpec(selector=selector))


def test_daemonset_and_mirror_pods_are_not_evicted() -> None:
    pods = [v1_pod("web", owner="ReplicaSet"), v1_pod("agent", owner="DaemonSet"), v1_pod("bare"),
            v1_pod("etcd", mirror=True), v1_pod("db", owner="StatefulSet")]
    assert [pod.metadata.name for pod in pods_to_evict(pods)] == ["web", "bare", "db"]


def test_budgets_that_select_the_pod_are_named() -> None:
    web = v1_pod("web", labels={"app": "web", "tier": "front"})
    budgets = [
        budget("web-pdb", client.V1LabelSelector(match_labels={"app": "web"})),
        budget("front-pdb", client.V1LabelSelector(match_expressions=[
            client.V1LabelSelectorRequirement(key="tier", operator="In", values=["front", "edge"])])),
        budget("not-db", client.V1LabelSelector(match_expressions=[
            client.V1LabelSelectorRequirement(key="app", operator="NotIn", values=["db"]),
            client.V1LabelSelectorRequirement(key="canary", operator="DoesNotExist")])),
        budget("all-in-apps", client.V1LabelSelector()),
        budget("db-pdb", client.V1LabelSelector(match_labels={"app": "db"})),
        budget("nothing", None),
        budget("elsewhere", client.V1LabelSelector(match_labels={"app": "web"}), namespace="other"),
    ]
    assert budgets_of(web, budgets) == ["all-in-apps", "front-pdb", "not-db", "web-pdb"]


def test_a_refused_eviction_names_the_pod_and_its_budget() -> None:
    message = blocked_message("worker-1", v1_pod("web"), ["web-pdb"], 300)
    assert "pod apps/web not evicted after 300 s" in message and "PodDisruptionBudget web-pdb" in message
    assert "no PodDisruptionBudget" in blocked_message("worker-1", v1_pod("web"), [], 300)


def test_cordoning_marks_the_node_and_remembers_a_cordon_numa_lab_did_not_make() -> None:
    assert mark_patch(v1_node("w")) == {"metadata": {"annotations": {MARK: CORDONED}}, "spec": {"unschedulable": True}}
    assert mark_patch(v1_node("w", unschedulable=True))["metadata"]["annotations"] == {MARK: KEPT}
    # a mark a failed run left stays as it was: numa-lab's own cordon is still numa-lab's
    assert mark_patch(v1_node("w", unschedulable=True, mark=CORDONED))["metadata"]["annotations"] == {MARK: CORDONED}


def test_another_marked_node_holds_the_reset_back() -> None:
    nodes = [v1_node("worker-1", mark=CORDONED), v1_node("worker-2"), v1_node("worker-3", mark=KEPT)]
    assert holder(nodes, "worker-2") == "worker-1"
    assert holder(nodes, "worker-1") == "worker-3"
    assert holder([v1_node("worker-1", mark=CORDONED), v1_node("worker-2")], "worker-1") is None


def test_a_node_left_marked_by_a_failed_run_is_released_on_the_next_run() -> None:
    """The config was written before the failed wait, so the next run plans no reset: the mark decides."""
    left = v1_node("w", unschedulable=True, mark=CORDONED)
    assert release_planned([], left) and release_planned([MEMORY_MANAGER_STATE], None)
    assert not release_planned([], v1_node("w")) and not release_planned([], None)
    assert release_patch(left, ready=True) == {"metadata": {"annotations": {MARK: None}},
                                               "spec": {"unschedulable": False}}


def test_release_keeps_a_cordon_numa_lab_did_not_make() -> None:
    assert release_patch(v1_node("w", unschedulable=True, mark=KEPT), ready=True) == {
        "metadata": {"annotations": {MARK: None}}}
    assert release_patch(v1_node("w", unschedulable=True), ready=True) is None  # not numa-lab's: untouched


def test_a_node_not_ready_stays_cordoned_and_marked() -> None:
    with pytest.raises(ResetError, match="w is not Ready: it stays cordoned"):
        release_patch(v1_node("w", ready=False, unschedulable=True, mark=CORDONED), ready=False)


# What the stage plans from those rules (the operations are recorded, not run).

@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []
    for module, op in ((policy_reset.python, "call"), (policy_reset.systemd, "service"), (policy_reset.files, "file")):
        monkeypatch.setattr(module, op, lambda _op=op, **kwargs: calls.append((_op, kwargs)))
    monkeypatch.setattr(policy_reset.context, "drain_options", lambda host: DrainOptions(force=True))
    return calls


def test_the_next_run_uncordons_a_node_a_failed_run_left_cordoned(planned, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(policy_reset.api, "read_node", lambda kubeconfig, name: v1_node(name, mark=CORDONED))
    policy_reset.after_ready([], tmp_path / "kubeconfig", "worker-1")
    assert [(op, kwargs["function"]) for op, kwargs in planned] == [("call", draining.release)]


def test_a_run_with_nothing_to_finish_plans_nothing(planned, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(policy_reset.api, "read_node", lambda kubeconfig, name: v1_node(name))
    policy_reset.after_ready([], tmp_path / "kubeconfig", "worker-1")
    policy_reset.before_config([], tmp_path / "kubeconfig", "worker-1")
    assert planned == []


def test_a_reset_drains_through_the_eviction_api_before_stopping_the_kubelet(planned, tmp_path) -> None:
    policy_reset.before_config([MEMORY_MANAGER_STATE], tmp_path / "kubeconfig", "worker-1", service="rke2-agent")
    assert [op for op, _ in planned] == ["call", "service", "file"]
    assert planned[0][1]["function"] is draining.drain
    assert planned[0][1]["options"] == DrainOptions(force=True)  # the host data's opt-ins reach the drain
    assert planned[1][1]["service"] == "rke2-agent" and planned[1][1]["running"] is False
