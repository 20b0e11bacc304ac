"""The bench's workload: seeded, every kind it promises, paced in pods per second."""

import itertools
from collections import Counter

import pytest

from numalab.explain.requests import pod_request
from numalab.fleet.errors import FleetError
from numalab.fleet.workload import Mix, at_rate, burst, pods_in, workload


def take(n, **kwargs):
    return list(itertools.islice(workload("numa-aware", **kwargs), n))


def test_same_seed_same_workload_and_names_apart_per_prefix():
    assert take(50, seed=4) == take(50, seed=4)
    assert take(50, seed=4) != take(50, seed=5)
    names = {o["metadata"]["name"] for o in take(20, seed=4)}
    other = {o["metadata"]["name"] for o in take(20, seed=4, prefix="default")}
    assert not names & other and all(name.startswith("numa-aware-") for name in names)


def test_the_mix_has_every_kind_with_the_scheduler_name():
    objects = take(400, seed=1)
    kinds = Counter(o["metadata"]["name"].split("-")[2] for o in objects)
    assert set(kinds) == {"guaranteed", "big", "hugepages", "burstable", "deployment"}
    pods = [o if o["kind"] == "Pod" else {"metadata": o["metadata"], "spec": o["spec"]["template"]["spec"]}
            for o in objects]
    assert {p["spec"]["schedulerName"] for p in pods} == {"numa-aware"}
    requests = [pod_request(p, "test") for p in pods]
    guaranteed_cpus = Counter(r.containers[0].requests["cpu"] // 1000 for r in requests if r.qos == "Guaranteed")
    assert set(guaranteed_cpus) == {1, 2, 4, 8}
    assert Counter(r.qos for r in requests)["Burstable"] == kinds["burstable"]
    assert any("hugepages-2Mi" in r.containers[0].requests for r in requests)
    assert any(r.containers[0].requests["memory"] == 10 * 2**30 for r in requests)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert 2 <= deployment["spec"]["replicas"] <= 4
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert selector == {"app": deployment["metadata"]["name"]}


def test_deployments_go_to_their_own_namespace_when_given_one():
    """Beside the bare pods, every one of them an orphan the ReplicaSet controller matches against every ReplicaSet
    there: 75 % of kube-controller-manager's CPU at 5,000 nodes (FillSettings.deployment_namespace)."""
    split = take(200, seed=1, namespace="default", deployment_namespace="fleet-deployments")
    assert {o["metadata"]["namespace"] for o in split if o["kind"] == "Pod"} == {"default"}
    assert {o["metadata"]["namespace"] for o in split if o["kind"] == "Deployment"} == {"fleet-deployments"}
    assert {o["metadata"]["namespace"] for o in take(200, seed=1, namespace="one")} == {"one"}
    assert [o["metadata"]["name"] for o in split] == [o["metadata"]["name"] for o in take(200, seed=1)]


def test_burst_takes_objects_until_enough_pods():
    objects = burst(workload("default-scheduler", seed=2), 30)
    made = [pods_in(o) for o in objects]
    assert sum(made) >= 30 and sum(made[:-1]) < 30


def test_at_rate_paces_pods_per_second():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    deployment = {"kind": "Deployment", "spec": {"replicas": 3}}
    pod = {"kind": "Pod", "spec": {}}
    paced = list(at_rate([pod, deployment, pod, pod], 10, clock=lambda: now[0], sleep=sleep))
    assert len(paced) == 4
    assert slept == pytest.approx([0.1, 0.3, 0.1])  # each object when the pods before it are due


def test_bad_mix_and_rate_are_refused():
    with pytest.raises(FleetError, match="mix.kinds: unknown kind 'gpu'"):
        take(1, mix=Mix(kinds={"gpu": 1}))
    with pytest.raises(FleetError, match="mix.cpus: weights"):
        take(1, mix=Mix(cpus={1: -1}))
    with pytest.raises(FleetError, match="rate: expected pods per second > 0"):
        list(at_rate([], 0))
