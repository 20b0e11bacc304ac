"""Which manager checkpoint files a configuration change makes stale, from args or KubeletConfiguration dicts."""

import pytest

from numalab.model.errors import ValidationError
from numalab.model.kubelet import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    KubeletSettings,
    kubelet_configuration,
    kubelet_policy,
    state_files_to_remove,
)
from numalab.model.topology import Topology

TWO = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-3", "memory": "4Gi"}, {"id": 1, "cpus": "4-7", "memory": "4Gi"}]}
)


def policy(**settings):
    return kubelet_policy(TWO, KubeletSettings.from_dict(settings))


def forms(p):
    """The same policy three ways: RKE2 kubelet-arg, command-line flags, KubeletConfiguration."""
    return [list(p.args), p.flags, kubelet_configuration(p)]


BASE = policy()


@pytest.mark.parametrize("old", forms(BASE))
@pytest.mark.parametrize("new", forms(BASE))
def test_same_configuration_in_any_form_removes_nothing(old, new):
    assert state_files_to_remove(old, new) == []


@pytest.mark.parametrize("form", [0, 1, 2])
def test_reserved_memory_change_under_static_removes_the_memory_checkpoint(form):
    more = policy(**{"system-reserved": {"cpu": "500m", "memory": "1Gi"}})
    assert state_files_to_remove(forms(BASE)[form], forms(more)[form]) == [MEMORY_MANAGER_STATE]
    moved = policy(**{"reserved-memory": [{"numa-node": 0, "memory": "1000Mi"}, {"numa-node": 1, "memory": "124Mi"}]})
    assert state_files_to_remove(forms(BASE)[form], forms(moved)[form]) == [MEMORY_MANAGER_STATE]


@pytest.mark.parametrize("form", [0, 1, 2])
def test_reserved_cpus_change_under_static_removes_the_cpu_checkpoint(form):
    other = policy(**{"reserved-cpus": "4"})
    assert state_files_to_remove(forms(BASE)[form], forms(other)[form]) == [CPU_MANAGER_STATE]


@pytest.mark.parametrize("form", [0, 1, 2])
def test_changes_the_checkpoints_do_not_record_remove_nothing(form):
    for settings in (
        {"topology-manager-policy": "restricted"},
        {"topology-manager-scope": "container"},
        {"eviction-hard": {"nodefs.available": "5%"}, "system-reserved": {"cpu": "500m", "memory": "512Mi"}},
        {"cpu-manager-policy-options": {"full-pcpus-only": "true"}},
    ):
        assert state_files_to_remove(forms(BASE)[form], forms(policy(**settings))[form]) == [], settings


def test_reservations_matter_only_under_the_static_policies():
    old = ["cpu-manager-policy=none", "reserved-cpus=0", "memory-manager-policy=None", "reserved-memory=0:memory=1Gi"]
    new = ["cpu-manager-policy=none", "reserved-cpus=1", "memory-manager-policy=None", "reserved-memory=1:memory=1Gi"]
    assert state_files_to_remove(old, new) == []
    static = [a.replace("none", "static").replace("None", "Static") for a in old]
    assert state_files_to_remove(static, [a.replace("none", "static").replace("None", "Static") for a in new]) == [
        CPU_MANAGER_STATE,
        MEMORY_MANAGER_STATE,
    ]


def test_the_same_reservation_spelled_differently_is_the_same():
    old = ["memory-manager-policy=Static", "reserved-memory=0:memory=1Gi", "reserved-memory=1:memory=512Mi"]
    assert (
        state_files_to_remove(old, ["memory-manager-policy=Static", "reserved-memory=0:memory=1024Mi;1:memory=0.5Gi"])
        == []
    )
    config = {"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 1, "limits": {"memory": 536870912}}]}
    config["reservedMemory"].append({"numaNode": 0, "limits": {"memory": "1Gi", "hugepages-2Mi": "0"}})
    assert state_files_to_remove(old, config) == []
    assert (
        state_files_to_remove(
            ["cpu-manager-policy=static", "reserved-cpus=0-1"],
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "1,0"},
        )
        == []
    )


def test_without_reserved_cpus_the_count_from_kube_and_system_reserved_decides():
    def static(kube_cpu):
        return ["cpu-manager-policy=static", f"kube-reserved=cpu={kube_cpu},memory=1Gi", "system-reserved=cpu=500m"]

    assert state_files_to_remove(static("500m"), static("400m")) == []  # one whole CPU either way
    assert state_files_to_remove(static("500m"), static("600m")) == [CPU_MANAGER_STATE]  # two now
    config = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}, "systemReserved": {"cpu": "1"}}
    assert state_files_to_remove(static("1500m"), config) == []


def test_policy_changes_and_defaults():
    assert state_files_to_remove({}, kubelet_configuration(BASE)) == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert state_files_to_remove([], {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None"}) == []
    assert state_files_to_remove(kubelet_configuration(policy(**{"memory-manager-policy": "None"})), BASE.args) == [
        MEMORY_MANAGER_STATE
    ]


def test_unreadable_input_is_named():
    with pytest.raises(ValidationError) as err:
        state_files_to_remove("cpu-manager-policy=static", [])
    assert err.value.field == "previous"
    with pytest.raises(ValidationError) as err:
        state_files_to_remove([], {"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0}]})
    assert err.value.field == "new.reservedMemory[0]"
    with pytest.raises(ValidationError) as err:
        state_files_to_remove(["memory-manager-policy=Static", "reserved-memory=x:memory=1Gi"], [])
    assert err.value.field == "previous.reserved-memory"
    with pytest.raises(ValidationError) as err:
        state_files_to_remove(["cpu-manager-policy=static", "reserved-cpus=a-b"], [])
    assert err.value.field == "previous.reserved-cpus"
