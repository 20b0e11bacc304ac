"""The policy-change reset plan: which state files a new kubelet config makes stale, from the config texts."""

from __future__ import annotations

import pytest
import yaml

from numalab.deploy.policy_reset import plan
from numalab.model import components
from numalab.model.kubelet import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    KubeletSettings,
    kubelet_configuration,
    kubelet_policy,
)
from numalab.model.topology import Topology

TWO_CELLS = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
)


def config_text(**settings) -> str:
    """The config file the node stage writes for these kubelet_settings."""
    policy = kubelet_policy(TWO_CELLS, KubeletSettings.from_dict(settings))
    return yaml.safe_dump(components.kubelet_configuration(kubelet_configuration(policy)), sort_keys=False)


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
    bare = yaml.safe_dump(components.kubelet_configuration({}))
    assert plan(bare, DEFAULT) == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert plan(bare, config_text(**{"cpu-manager-policy": "none", "memory-manager-policy": "None"})) == []
