"""Which pods a policy-change reset's drain refuses to evict unless host data opts in (kubectl drain's rules for
--force and --delete-emptydir-data), and the one line an unanswered API gives. Pods are the client's models."""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client

from numalab.model.node_reset import (
    EMPTYDIR_KEY,
    FORCE_KEY,
    MARK,
    MIRROR,
    NO_OPT_IN,
    DrainOptions,
    ResetError,
    check_evictable,
    refused_pods,
    unreachable_message,
)


def v1_pod(name: str, owner: str | None = None, controller: bool = True, emptydir: bool = False,
           phase: str = "Running", mirror: bool = False, deleting: bool = False) -> client.V1Pod:
    refs = [client.V1OwnerReference(api_version="apps/v1", kind=owner, name="x", uid="u", controller=controller)
            ] if owner else None
    volumes = [client.V1Volume(name="scratch", empty_dir=client.V1EmptyDirVolumeSource())] if emptydir else None
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="apps", owner_references=refs,
                                     annotations={MIRROR: "hash"} if mirror else None,
                                     deletion_timestamp=datetime.datetime(2026, 1, 1) if deleting else None),
        spec=client.V1PodSpec(containers=[], volumes=volumes),
        status=client.V1PodStatus(phase=phase))


def test_pods_a_controller_recreates_without_emptydir_are_never_refused() -> None:
    pods = [v1_pod("web", owner="ReplicaSet"), v1_pod("db", owner="StatefulSet"), v1_pod("job", owner="Job")]
    assert refused_pods(pods, NO_OPT_IN) == ([], [])


def test_bare_pods_and_emptydir_pods_are_refused_by_default() -> None:
    pods = [v1_pod("bare"), v1_pod("cache", owner="ReplicaSet", emptydir=True), v1_pod("both", emptydir=True)]
    assert refused_pods(pods, NO_OPT_IN) == (["apps/bare", "apps/both"], ["apps/both", "apps/cache"])


def test_an_owner_that_is_not_the_controller_leaves_the_pod_bare() -> None:
    """kubectl asks for the controller reference (controller: true), not any owner."""
    assert refused_pods([v1_pod("adopted", owner="ConfigMap", controller=False)], NO_OPT_IN) == (["apps/adopted"], [])


def test_daemonset_mirror_finished_and_terminating_pods_are_not_refused() -> None:
    pods = [v1_pod("agent", owner="DaemonSet", emptydir=True), v1_pod("etcd", mirror=True),
            v1_pod("done", phase="Succeeded", emptydir=True), v1_pod("failed", phase="Failed"),
            v1_pod("leaving", deleting=True, emptydir=True)]
    assert refused_pods(pods, NO_OPT_IN) == ([], [])


def test_each_opt_in_allows_its_own_kind_only() -> None:
    pods = [v1_pod("bare"), v1_pod("cache", owner="ReplicaSet", emptydir=True)]
    assert refused_pods(pods, DrainOptions(force=True)) == ([], ["apps/cache"])
    assert refused_pods(pods, DrainOptions(delete_emptydir_data=True)) == (["apps/bare"], [])
    assert refused_pods(pods, DrainOptions(force=True, delete_emptydir_data=True)) == ([], [])


def test_a_refusal_is_one_line_naming_node_pods_keys_and_what_changed() -> None:
    with pytest.raises(ResetError) as before:
        check_evictable("worker-1", [v1_pod("bare"), v1_pod("cache", owner="ReplicaSet", emptydir=True)], NO_OPT_IN,
                        cordoned=False)
    message = str(before.value)
    assert message.startswith("drain worker-1 refused: no controller re-creates apps/bare") and "\n" not in message
    assert f"{FORCE_KEY}: true in worker-1's host data" in message and f"{EMPTYDIR_KEY}: true" in message
    assert "nothing was changed on worker-1 (not cordoned)" in message
    with pytest.raises(ResetError, match=f"worker-1 stays cordoned and marked {MARK}"):
        check_evictable("worker-1", [v1_pod("bare")], NO_OPT_IN, cordoned=True)
    check_evictable("worker-1", [v1_pod("bare")], DrainOptions(force=True), cordoned=False)  # allowed: no raise


def test_an_unanswered_api_names_node_error_and_what_to_do() -> None:
    message = unreachable_message("worker-2", "HTTP 503 Service Unavailable", "/state/kubeconfig")
    assert message.startswith("worker-2: its policy-change reset needs the cluster's API to drain it")
    assert "(HTTP 503 Service Unavailable)" in message and "nothing was changed on worker-2" in message
    assert message.endswith("bring the API server back (kubeconfig /state/kubeconfig) and run again")
