"""The reset's API calls against a fake API server on 127.0.0.1: evictions (not deletes) that respect
PodDisruptionBudgets, the mark that lets one node at a time in, and the end of a reset after a failed run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from numalab.deploy import draining
from numalab.model.node_reset import CORDONED, KEPT, MARK, ResetError
from tests.deploy.fakeapi import Budget, FakeCluster, fake_api, node, pod


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add(node("worker-1"), node("worker-2"),
                pod("apps", "web-1", "worker-1", labels={"app": "web"}, owner="ReplicaSet"),
                pod("apps", "db-0", "worker-1", labels={"app": "db"}, owner="StatefulSet"),
                pod("kube-system", "numa-align-x", "worker-1", owner="DaemonSet"),
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


def test_no_api_means_nothing_to_drain(tmp_path: Path) -> None:
    assert draining.take(tmp_path / "no-kubeconfig", "worker-1") is False
