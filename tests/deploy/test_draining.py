"""The reset's API calls against a fake API server on 127.0.0.1: evictions (not deletes) that respect
PodDisruptionBudgets, the mark that lets one node at a time in, the end of a reset after a failed run, and the
refusals that leave the node as it was: no API answer, bare pods and emptyDir pods without their opt-in."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from numalab.deploy import api, draining
from numalab.model.node_reset import CORDONED, KEPT, MARK, NO_OPT_IN, DrainOptions, ResetError
from tests.deploy.fakeapi import Budget, FakeCluster, fake_api, node, pod


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add(node("worker-1"), node("worker-2"),
                pod("apps", "web-1", "worker-1", labels={"app": "web"}, owner="ReplicaSet"),
                pod("apps", "db-0", "worker-1", labels={"app": "db"}, owner="StatefulSet"),
                pod("kube-system", "numa-align-x", "worker-1", owner="DaemonSet", emptydir=True),
                pod("apps", "web-2", "worker-2", labels={"app": "web"}, owner="ReplicaSet"))
    mirror = pod("kube-system", "etcd-worker-1", "worker-1", owner="Node")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    cluster.add(mirror)
    return cluster


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> Iterator[Path]:
    with fake_api(cluster, tmp_path) as path:
        yield path


def marks(cluster: FakeCluster) -> dict[str, tuple[str | None, bool]]:
    return {name: (n["metadata"].get("annotations", {}).get(MARK), n["spec"].get("unschedulable", False))
            for name, n in cluster.nodes.items()}


def test_drain_evicts_all_but_daemonset_and_mirror_pods_and_marks_the_node(cluster, kubeconfig) -> None:
    draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    assert sorted(cluster.evictions) == [("apps", "db-0", 201), ("apps", "web-1", 201)]
    assert sorted(cluster.pods) == [("apps", "web-2"), ("kube-system", "etcd-worker-1"),
                                    ("kube-system", "numa-align-x")]
    assert marks(cluster) == {"worker-1": (CORDONED, True), "worker-2": (None, False)}


def test_an_eviction_a_budget_refuses_is_retried_until_it_allows_it(cluster, kubeconfig) -> None:
    cluster.budgets.append(Budget("apps", "web-pdb", {"app": "web"}, refusals=2))
    draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    assert [code for ns, name, code in cluster.evictions if name == "web-1"] == [429, 429, 201]
    assert ("apps", "web-1") not in cluster.pods


def test_a_budget_that_never_allows_fails_the_drain_naming_pod_and_budget(cluster, kubeconfig) -> None:
    cluster.budgets.append(Budget("apps", "web-pdb", {"app": "web"}))
    with pytest.raises(ResetError, match=r"pod apps/web-1 not evicted after 0 s: its PodDisruptionBudget web-pdb"):
        draining.drain(kubeconfig, "worker-1", timeout=0.3, retry=0.05)
    assert ("apps", "web-1") in cluster.pods and ("apps", "db-0") not in cluster.pods
    assert marks(cluster)["worker-1"] == (CORDONED, True)  # cordoned and marked: the next run finishes it


def test_a_node_under_reset_keeps_every_other_node_from_starting_one(cluster, kubeconfig) -> None:
    cluster.nodes["worker-1"]["metadata"]["annotations"][MARK] = CORDONED
    with pytest.raises(ResetError, match="worker-2: its policy-change reset waits for node worker-1's"):
        draining.drain(kubeconfig, "worker-2", timeout=5, retry=0.05)
    assert cluster.evictions == [] and marks(cluster)["worker-2"] == (None, False)


def test_two_drains_at_once_let_only_one_node_in(cluster, kubeconfig) -> None:
    outcomes: dict[str, str] = {}

    def take(name: str) -> None:
        try:
            outcomes[name] = str(draining.take(kubeconfig, name))
        except ResetError as exc:
            outcomes[name] = str(exc)

    threads = [threading.Thread(target=take, args=(name,)) for name in ("worker-1", "worker-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values())[0] == "True" and "waits for node" in sorted(outcomes.values())[1]
    assert sum(mark == CORDONED for mark, _ in marks(cluster).values()) == 1


def test_release_uncordons_a_ready_node_and_removes_the_mark(cluster, kubeconfig) -> None:
    cluster.nodes["worker-1"] = node("worker-1", unschedulable=True, annotations={MARK: CORDONED})
    draining.release(kubeconfig, "worker-1")
    assert marks(cluster)["worker-1"] == (None, False)
    draining.drain(kubeconfig, "worker-2", timeout=5, retry=0.05)  # the next node may go now
    assert marks(cluster)["worker-2"] == (CORDONED, True)


def test_release_leaves_a_cordon_it_found_and_a_node_not_ready(cluster, kubeconfig) -> None:
    cluster.nodes["worker-1"] = node("worker-1", unschedulable=True, annotations={MARK: KEPT})
    cluster.nodes["worker-2"] = node("worker-2", ready=False, unschedulable=True, annotations={MARK: CORDONED})
    draining.release(kubeconfig, "worker-1")
    with pytest.raises(ResetError, match="worker-2 is not Ready"):
        draining.release(kubeconfig, "worker-2")
    assert marks(cluster) == {"worker-1": (None, True), "worker-2": (CORDONED, True)}


def unanswered_kubeconfig(directory: Path) -> Path:
    """A kubeconfig naming a port nothing listens on (the server down, or out of reach)."""
    with fake_api(FakeCluster(), directory) as path:
        pass  # the server is shut down on leaving: its port no longer answers
    return path


def test_an_api_that_does_not_answer_refuses_the_drain_naming_node_and_error(tmp_path: Path) -> None:
    """Before: take() returned False (taken for "nothing to drain") and the kubelet was stopped under its pods."""
    kubeconfig = unanswered_kubeconfig(tmp_path)
    with pytest.raises(ResetError) as caught:
        draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    message = str(caught.value)
    assert message.startswith("worker-1: its policy-change reset needs the cluster's API") and "\n" not in message
    assert "Connection refused" in message and "nothing was changed on worker-1" in message
    assert f"kubeconfig {kubeconfig}" in message


def test_no_kubeconfig_is_no_answer_either(tmp_path: Path) -> None:
    with pytest.raises(ResetError, match="worker-1: .*did not answer .*Invalid kube-config file"):
        draining.take(tmp_path / "no-kubeconfig", "worker-1")


def test_an_api_error_refuses_the_drain_and_changes_nothing(cluster, kubeconfig) -> None:
    cluster.failing = 503
    with pytest.raises(ResetError, match=r"worker-1: .*did not answer \(HTTP 503 .*nothing was changed on worker-1"):
        draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    cluster.failing = None
    assert cluster.evictions == [] and marks(cluster)["worker-1"] == (None, False)


def test_a_node_the_api_does_not_have_is_a_first_join_with_nothing_to_drain(cluster, kubeconfig) -> None:
    assert draining.take(kubeconfig, "worker-9") is False
    draining.drain(kubeconfig, "worker-9", timeout=5, retry=0.05)
    assert cluster.evictions == [] and "worker-9" not in cluster.nodes


def test_bare_and_emptydir_pods_refuse_the_drain_naming_each_and_its_key(cluster, kubeconfig) -> None:
    cluster.add(pod("apps", "bare-b", "worker-1"), pod("apps", "bare-a", "worker-1"),
                pod("apps", "cache-0", "worker-1", owner="StatefulSet", emptydir=True),
                pod("apps", "scratch", "worker-1", emptydir=True))
    with pytest.raises(ResetError) as caught:
        draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    message = str(caught.value)
    assert "no controller re-creates apps/bare-a, apps/bare-b, apps/scratch" in message
    assert "drain_force: true" in message
    assert "apps/cache-0, apps/scratch keep emptyDir data" in message and "drain_delete_emptydir_data: true" in message
    assert "nothing was changed on worker-1 (not cordoned)" in message and "\n" not in message
    assert cluster.evictions == [] and marks(cluster)["worker-1"] == (None, False)  # exactly as it was


def test_a_bare_pod_alone_names_only_its_key(cluster, kubeconfig) -> None:
    cluster.add(pod("apps", "bare", "worker-1"))
    with pytest.raises(ResetError, match="drain worker-1 refused: no controller re-creates apps/bare") as caught:
        draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    assert "emptyDir" not in str(caught.value)
    assert marks(cluster)["worker-1"] == (None, False)


@pytest.mark.parametrize("options, refused", [
    (DrainOptions(force=True), "keep emptyDir data"),
    (DrainOptions(delete_emptydir_data=True), "no controller re-creates apps/bare"),
])
def test_each_key_opts_in_only_its_own_pods(cluster, kubeconfig, options, refused) -> None:
    cluster.add(pod("apps", "bare", "worker-1"), pod("apps", "cache-0", "worker-1", owner="StatefulSet", emptydir=True))
    with pytest.raises(ResetError, match=refused):
        draining.drain(kubeconfig, "worker-1", options, timeout=5, retry=0.05)
    assert cluster.evictions == []


def test_the_opt_in_keys_let_the_drain_evict_those_pods(cluster, kubeconfig) -> None:
    cluster.add(pod("apps", "bare", "worker-1"), pod("apps", "cache-0", "worker-1", owner="StatefulSet", emptydir=True))
    options = DrainOptions(force=True, delete_emptydir_data=True)
    draining.drain(kubeconfig, "worker-1", options, timeout=5, retry=0.05)
    assert {(ns, name) for ns, name, code in cluster.evictions if code == 201} == {
        ("apps", "bare"), ("apps", "cache-0"), ("apps", "web-1"), ("apps", "db-0")}
    assert marks(cluster)["worker-1"] == (CORDONED, True)


def test_finished_pods_do_not_refuse_the_drain(cluster, kubeconfig) -> None:
    """As kubectl drain: a pod that ran to its end loses nothing more by its eviction."""
    cluster.add(pod("apps", "job-done", "worker-1", phase="Succeeded", emptydir=True),
                pod("apps", "job-failed", "worker-1", phase="Failed"))
    draining.drain(kubeconfig, "worker-1", timeout=5, retry=0.05)
    assert ("apps", "job-done") not in cluster.pods and marks(cluster)["worker-1"] == (CORDONED, True)


def test_a_bare_pod_bound_after_the_cordon_stops_the_drain_before_any_eviction(cluster, kubeconfig) -> None:
    """A pod given spec.nodeName directly bypasses the cordon: checked again before the evictions."""
    assert draining.take(kubeconfig, "worker-1")
    cluster.add(pod("apps", "late", "worker-1"))
    with pytest.raises(ResetError, match="apps/late .*worker-1 stays cordoned and marked"):
        draining.evict_pods(api.core_api(kubeconfig), "worker-1", NO_OPT_IN, 5, 0.05)
    assert cluster.evictions == []
