"""Stage verify's judgement: what a node shows against what the deploy computed, and the line it prints."""

from __future__ import annotations

import yaml

from numalab.deploy.node import kubelet_config_text
from numalab.deploy.policy import expected_policies
from numalab.deploy.verify import POLICY_FIELDS, problems, row
from numalab.model import components
from numalab.model.kubelet import KubeletSettings, kubelet_policy
from numalab.model.topology import Topology
from numalab.placement.api_objects import kubelet_policies, numa_align_allocatable

EXPECTED = {
    "cpuManagerPolicy": "static",
    "memoryManagerPolicy": "Static",
    "topologyManagerPolicy": "single-numa-node",
    "topologyManagerScope": "pod",
}


def seen(allocatable: dict[int, int], **policies: str) -> dict:
    return {"allocatable": allocatable, "policies": {**EXPECTED, **policies}}


def test_a_node_showing_every_numa_node_and_the_policies_has_no_problems() -> None:
    assert problems(seen({0: 2, 1: 2}), [0, 1], EXPECTED) == []


def test_missing_or_empty_numa_resources_are_named() -> None:
    assert problems(seen({0: 2}), [0, 1], EXPECTED) == ["no allocatable numa-align/numa-1"]
    assert problems(seen({0: 0, 1: 0, 2: 1}), [0, 1, 2], EXPECTED) == [
        "no allocatable numa-align/numa-0, numa-align/numa-1"
    ]
    assert problems(seen({}), [0], EXPECTED) == ["no allocatable numa-align/numa-0"]


def test_a_resource_for_a_node_the_host_lacks_is_not_a_problem() -> None:
    assert problems(seen({0: 2, 1: 2, 7: 1}), [0, 1], EXPECTED) == []


def test_each_policy_that_differs_is_named_with_both_values() -> None:
    found = problems(seen({0: 2, 1: 2}, cpuManagerPolicy="none", topologyManagerScope="container"), [0, 1], EXPECTED)
    assert found == [
        "configz cpuManagerPolicy is 'none', not 'static'",
        "configz topologyManagerScope is 'container', not 'pod'",
    ]


def test_a_policy_missing_from_what_was_seen_is_a_problem() -> None:
    shown = {"allocatable": {0: 1}, "policies": {}}
    expected = [f"configz {field} is None, not {EXPECTED[field]!r}" for field in POLICY_FIELDS]
    assert problems(shown, [0], EXPECTED) == expected


def test_problems_of_both_kinds_are_listed_together() -> None:
    found = problems(seen({1: 3}, memoryManagerPolicy="None"), [0, 1], EXPECTED)
    assert found == ["no allocatable numa-align/numa-0", "configz memoryManagerPolicy is 'None', not 'Static'"]


def test_row_lists_resources_in_node_order_and_the_policies() -> None:
    assert row("worker-a", seen({1: 4, 0: 2})) == (
        "verify worker-a: numa-align/numa-0=2 numa-align/numa-1=4 | cpu static, memory Static, "
        "topology single-numa-node/pod"
    )


def test_what_the_api_answers_goes_through_the_same_readers() -> None:
    """observe() builds `seen` with these readers from a Node's allocatable and the kubelet's /configz."""
    allocatable = {"cpu": "4", "memory": "4Gi", "numa-align/numa-0": "2", "numa-align/numa-1": "2", "pods": "110"}
    shown = {
        "allocatable": numa_align_allocatable(allocatable),
        "policies": kubelet_policies({"kubeletconfig": {**EXPECTED, "cgroupDriver": "systemd"}}),
    }
    assert problems(shown, [0, 1], EXPECTED) == []


def test_expected_policies_from_the_config_the_node_stage_writes(cluster) -> None:
    topology = Topology.from_dict(
        {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
    )
    policy = kubelet_policy(topology, KubeletSettings.from_dict({"topology-manager-policy": "restricted"}))
    assert expected_policies(policy) == {**EXPECTED, "topologyManagerPolicy": "restricted"}
    # the config the upstream node stage writes shows the same (RKE2 writes the policy's args instead)
    written = yaml.safe_load(kubelet_config_text(cluster, policy))
    assert kubelet_policies({"kubeletconfig": written}) == expected_policies(policy)


def test_configz_policies_fill_in_the_kubelet_defaults(cluster) -> None:
    defaults = {
        "cpuManagerPolicy": "none",
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
    }
    assert kubelet_policies({"kubeletconfig": {}}) == defaults
    assert kubelet_policies({"kubeletconfig": components.kubelet_configuration(cluster, {})}) == defaults
    static = kubelet_policies({"kubeletconfig": {"cpuManagerPolicy": "static"}})
    assert static == {**defaults, "cpuManagerPolicy": "static"}
