"""QoS class and exclusive-cpu rules over pod specs, as the API server and static CPU Manager apply them."""

from __future__ import annotations

import pytest

from numalab.model.errors import ValidationError
from numalab.placement.pod_specs import containers, exclusive_cpus, guaranteed_problems, numa_align_requests, qos_class


def ctr(name, requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "probe", "resources": resources, **extra}


G = {"cpu": "1", "memory": "64Mi"}


def test_requests_equal_limits_everywhere_is_guaranteed():
    spec = {"initContainers": [ctr("init", G, G)], "containers": [ctr("app", G, G)]}
    assert qos_class(spec) == "Guaranteed"


def test_limits_only_default_the_requests():
    assert qos_class({"containers": [ctr("app", limits={"cpu": "2", "memory": "1Gi"})]}) == "Guaranteed"


def test_equal_quantities_in_different_units_are_equal():
    spec = {"containers": [ctr("app", {"cpu": "1000m", "memory": "1024Mi"}, {"cpu": "1", "memory": "1Gi"})]}
    assert qos_class(spec) == "Guaranteed"


def test_one_burstable_init_container_makes_the_pod_burstable():
    spec = {"initContainers": [ctr("init", {"cpu": "100m"})], "containers": [ctr("app", G, G)]}
    assert qos_class(spec) == "Burstable"


def test_no_requests_or_limits_is_best_effort():
    assert qos_class({"containers": [ctr("app")]}) == "BestEffort"


def test_guaranteed_problems_name_the_field():
    ref = containers({"containers": [ctr("app", {"cpu": "500m", "memory": "64Mi"}, {"cpu": "1"})]})[0]
    assert guaranteed_problems(ref) == [
        ("spec.containers[0].resources.requests.cpu", "cpu request differs from its limit"),
        ("spec.containers[0].resources.limits.memory", "no memory limit"),
    ]


def test_exclusive_cpus_only_for_whole_cores_in_guaranteed_pods():
    spec = {"containers": [ctr("a", G, G), ctr("b", {"cpu": "1500m", "memory": "1Mi"},
                                                  {"cpu": "1500m", "memory": "1Mi"})]}
    a, b = containers(spec)
    assert exclusive_cpus(spec, a) == 1
    assert exclusive_cpus(spec, b) == 0
    burstable = {"containers": [ctr("a", {"cpu": "2", "memory": "1Mi"}, {"cpu": "3", "memory": "1Mi"})]}
    assert exclusive_cpus(burstable, containers(burstable)[0]) == 0


def test_containers_come_init_first_with_sidecars_marked():
    spec = {
        "initContainers": [ctr("anchor"), ctr("proxy", restartPolicy="Always")],
        "containers": [ctr("app")],
    }
    assert [(c.kind, c.name, c.path) for c in containers(spec, "spec.template.spec")] == [
        ("init", "anchor", "spec.template.spec.initContainers[0]"),
        ("sidecar", "proxy", "spec.template.spec.initContainers[1]"),
        ("app", "app", "spec.template.spec.containers[0]"),
    ]


def test_numa_align_requests_count_only_names_the_plugin_registers():
    """A zero-padded numa-align/numa-01 is a resource no node offers: not a request for node 1."""
    limits = {"numa-align/numa-1": "2", "numa-align/numa-01": "1", "numa-align/numa-x": "1", "cpu": "2"}
    ref = containers({"containers": [ctr("a", limits=limits)]})[0]
    assert numa_align_requests(ref) == {1: 2}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"containers": {"name": "a"}}, "spec.containers"),
        ({"containers": ["a"]}, "spec.containers[0]"),
        ({"containers": [ctr("a", limits={"cpu": "lots"})]}, "spec.containers[0].resources.limits.cpu"),
        ({"containers": [{"name": "a", "resources": {"limits": ["cpu"]}}]},
         "spec.containers[0].resources.limits"),
        ({"containers": [ctr("a", limits={"numa-align/numa-0": "500m"})]},
         "spec.containers[0].resources.limits.numa-align/numa-0"),
    ],
)
def test_malformed_specs_name_the_field(spec, field):
    with pytest.raises(ValidationError) as err:
        qos_class(spec)
        numa_align_requests(containers(spec)[0])
    assert err.value.field == field
