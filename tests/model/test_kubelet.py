import pytest

from numalab.model.errors import ValidationError
from numalab.model.kubelet import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    KubeletSettings,
    kubelet_policy,
    parse_kubelet_args,
    state_files_to_remove,
)
from numalab.model.quantity import parse_bytes
from numalab.model.topology import Topology


def topo(*cells, **extra):
    return Topology.from_dict({"cells": [{"id": i, "cpus": c, "memory": m, **extra} for i, c, m in cells]})


TWO = topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi"))


def args_of(topology=TWO, **settings):
    return parse_kubelet_args(kubelet_policy(topology, KubeletSettings.from_dict(settings)).args)


def rejected(topology=TWO, **settings):
    with pytest.raises(ValidationError) as err:
        kubelet_policy(topology, KubeletSettings.from_dict(settings))
    return err.value


def test_defaults():
    args = args_of()
    assert args["cpu-manager-policy"] == ["static"]
    assert args["memory-manager-policy"] == ["Static"]
    assert args["topology-manager-policy"] == ["single-numa-node"]
    assert args["topology-manager-scope"] == ["pod"]
    assert args["kube-reserved"] == ["cpu=500m,memory=512Mi"]
    assert args["system-reserved"] == ["cpu=500m,memory=512Mi"]
    assert args["reserved-cpus"] == ["0"]
    assert args["reserved-memory"] == ["0:memory=1124Mi"]
    assert args["eviction-hard"] == [
        "imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"
    ]


def test_kubernetes_docs_worked_example_totals_5220Mi():
    big = topo((0, "0-15", "64Gi"), (1, "16-31", "64Gi"))
    args = args_of(
        big,
        **{
            "kube-reserved": {"cpu": "1", "memory": "4Gi"},
            "system-reserved": {"memory": "1Gi"},
            "eviction-hard": {"memory.available": "100Mi"},
        },
    )
    assert args["reserved-memory"] == ["0:memory=5220Mi"]


def test_reserved_memory_sum_equals_node_allocatable_reservation_exactly():
    settings = {
        "kube-reserved": {"cpu": "250m", "memory": "333Mi"},
        "system-reserved": {"cpu": "250m", "memory": "1.5Gi"},
        "eviction-hard": {"memory.available": "77Ki"},
    }
    policy = kubelet_policy(TWO, KubeletSettings.from_dict(settings))
    assert sum(k["memory"] for k in policy.reserved_memory.values()) == (
        parse_bytes("333Mi") + parse_bytes("1.5Gi") + parse_bytes("77Ki")
    )


def test_default_split_spills_to_the_next_cell_only_when_cell_0_is_full():
    small = topo((0, "0-1", "1Gi"), (1, "2-3", "2Gi"))
    args = args_of(small, **{"kube-reserved": {"cpu": "1", "memory": "1Gi"}, "system-reserved": {"memory": "256Mi"}})
    assert args["reserved-memory"] == ["0:memory=1Gi", "1:memory=356Mi"]


def test_split_leaves_hugepages_out_of_regular_memory():
    hp = topo((0, "0-1", "2Gi"), (1, "2-3", "2Gi"), hugepages={"1Gi": 1})
    args = args_of(hp)
    assert args["reserved-memory"] == ["0:memory=1Gi", "1:memory=100Mi"]


def test_reservation_that_does_not_fit_the_node_is_refused():
    err = rejected(topo((0, "0-3", "1Gi")), **{"kube-reserved": {"cpu": "1", "memory": "2Gi"}})
    assert err.field == "settings.kube-reserved.memory" and "does not fit" in str(err)


def test_explicit_split_must_add_up():
    err = rejected(**{"reserved-memory": [{"numa-node": 0, "memory": "1Gi"}]})
    assert err.field == "settings.reserved-memory"
    assert "adds up to 1Gi but kube-reserved + system-reserved + eviction-hard memory.available is 1124Mi" in str(err)


def test_explicit_split_that_adds_up_is_used():
    args = args_of(**{"reserved-memory": [{"numa-node": 0, "memory": "1000Mi"}, {"numa-node": 1, "memory": "124Mi"}]})
    assert args["reserved-memory"] == ["0:memory=1000Mi", "1:memory=124Mi"]


def test_explicit_split_may_not_exceed_a_cell():
    small = topo((0, "0-1", "1Gi"), (1, "2-3", "8Gi"))
    err = rejected(
        small,
        **{
            "kube-reserved": {"cpu": "1", "memory": "2Gi"},
            "system-reserved": {},
            "eviction-hard": {"memory.available": "0"},
            "reserved-memory": [{"numa-node": 0, "memory": "2Gi"}],
        },
    )
    assert err.field == "settings.reserved-memory[0].memory" and "exceeds the 1Gi" in str(err)


def test_explicit_split_node_must_exist():
    err = rejected(**{"reserved-memory": [{"numa-node": 5, "memory": "1124Mi"}]})
    assert err.field == "settings.reserved-memory[0].numa-node" and "does not exist" in str(err)


def test_memory_percentage_with_static_is_refused():
    err = rejected(**{"eviction-hard": {"memory.available": "5%"}})
    assert err.field == "settings.eviction-hard.memory.available"


def test_eviction_hard_keeps_nodefs_and_imagefs_when_memory_is_overridden():
    args = args_of(**{"eviction-hard": {"memory.available": "200Mi"}})
    assert args["eviction-hard"] == [
        "imagefs.available<15%,memory.available<200Mi,nodefs.available<10%,nodefs.inodesFree<5%"
    ]
    assert args["reserved-memory"] == ["0:memory=1224Mi"]


def test_unknown_eviction_signal_is_refused():
    assert rejected(**{"eviction-hard": {"memory.free": "1Gi"}}).field == "settings.eviction-hard.memory.free"


def test_static_cpu_manager_needs_a_cpu_reservation():
    err = rejected(**{"kube-reserved": {"memory": "512Mi"}, "system-reserved": {"memory": "512Mi"}})
    assert err.field == "settings.kube-reserved.cpu" and "reserved-cpus" in str(err)


def test_reserved_cpus_satisfy_the_static_cpu_manager():
    args = args_of(
        **{"kube-reserved": {"memory": "512Mi"}, "system-reserved": {"memory": "512Mi"}, "reserved-cpus": "0,4"}
    )
    assert args["reserved-cpus"] == ["0,4"]


def test_reserved_cpus_are_whole_cpus_from_the_lowest_cell_and_spill_over():
    assert args_of(**{"kube-reserved": {"cpu": "2", "memory": "512Mi"}})["reserved-cpus"] == ["0-2"]
    small = topo((3, "6-7", "4Gi"), (1, "2-3", "4Gi"), (2, "4-5", "4Gi"))
    assert args_of(small, **{"kube-reserved": {"cpu": "2500m", "memory": "1Gi"}})["reserved-cpus"] == ["2-4"]


def test_reserved_cpus_must_exist_and_leave_cpus_for_pods():
    assert "not on this node" in str(rejected(**{"reserved-cpus": "0,9"}))
    assert "every CPU" in str(rejected(**{"reserved-cpus": "0-7"}))
    assert "leaves none for pods" in str(rejected(topo((0, "0-1", "4Gi")), **{"kube-reserved": {"cpu": "2"}}))
    assert rejected(**{"reserved-cpus": "a-b"}).field == "settings.reserved-cpus"


def test_none_cpu_policy_reserves_no_cpus():
    args = args_of(**{"cpu-manager-policy": "none", "kube-reserved": {"memory": "512Mi"}})
    assert "reserved-cpus" not in args


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("topology-manager-policy", "strict", "not one of none, best-effort, restricted, single-numa-node"),
        ("topology-manager-scope", "node", "not one of container, pod"),
        ("cpu-manager-policy", "dynamic", "not one of none, static"),
        ("memory-manager-policy", "static", "did you mean 'Static'"),
    ],
)
def test_policy_names(setting, value, words):
    err = rejected(**{setting: value})
    assert err.field == f"settings.{setting}" and words in str(err)


def test_more_than_eight_numa_nodes_needs_max_allowable_numa_nodes():
    nine = topo(*[(i, str(i), "1Gi") for i in range(10)])
    err = rejected(nine)
    assert err.field == "settings.topology-manager-policy-options.max-allowable-numa-nodes"
    assert "10 NUMA nodes" in str(err)
    assert "below" in str(rejected(nine, **{"topology-manager-policy-options": {"max-allowable-numa-nodes": "9"}}))
    args = args_of(nine, **{"topology-manager-policy-options": {"max-allowable-numa-nodes": 16}})
    assert args["topology-manager-policy-options"] == ["max-allowable-numa-nodes=16"]
    assert "topology-manager-policy-options" not in args_of(nine, **{"topology-manager-policy": "none"})


def test_policy_options():
    args = args_of(
        **{
            "topology-manager-policy-options": {"prefer-closest-numa-nodes": True},
            "cpu-manager-policy-options": {"full-pcpus-only": "true"},
        }
    )
    assert args["topology-manager-policy-options"] == ["prefer-closest-numa-nodes=true"]
    assert args["cpu-manager-policy-options"] == ["full-pcpus-only=true"]
    assert (
        rejected(**{"cpu-manager-policy-options": {"fast": "true"}}).field == "settings.cpu-manager-policy-options.fast"
    )
    assert "need cpu-manager-policy static" in str(
        rejected(**{"cpu-manager-policy": "none", "cpu-manager-policy-options": {"full-pcpus-only": "true"}})
    )


def test_unknown_settings_and_reservations_are_named():
    with pytest.raises(ValidationError) as err:
        KubeletSettings.from_dict({"cpu-manager": "static"})
    assert err.value.field == "settings.cpu-manager"
    assert rejected(**{"kube-reserved": {"gpu": "1"}}).field == "settings.kube-reserved.gpu"


def test_memory_manager_none_emits_no_reserved_memory_and_refuses_a_split():
    assert "reserved-memory" not in args_of(**{"memory-manager-policy": "None"})
    err = rejected(**{"memory-manager-policy": "None", "reserved-memory": [{"numa-node": 0, "memory": "1Gi"}]})
    assert "only applies" in str(err)


def test_static_memory_manager_needs_a_memory_reservation():
    err = rejected(**{"kube-reserved": {"cpu": "1"}, "system-reserved": {}, "eviction-hard": {"memory.available": "0"}})
    assert err.field == "settings.kube-reserved.memory"


def test_policy_change_detector():
    old = ["cpu-manager-policy=none", "memory-manager-policy=None", "topology-manager-policy=none"]
    new = list(kubelet_policy(TWO).args)
    assert state_files_to_remove(old, new) == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert state_files_to_remove(new, new) == []
    # reservation or topology policy changes keep the state files
    changed = [a.replace("single-numa-node", "restricted") for a in new]
    assert state_files_to_remove(new, changed) == []
    only_memory = [a for a in new if not a.startswith("memory-manager-policy")]
    assert state_files_to_remove(new, only_memory) == [MEMORY_MANAGER_STATE]
    # absent flags mean the kubelet defaults, and leading dashes do not matter
    assert state_files_to_remove([], ["--cpu-manager-policy=none"]) == []
    assert state_files_to_remove([], ["--cpu-manager-policy=static"]) == [CPU_MANAGER_STATE]


def test_explicit_split_names_any_hugepage_size_a_kernel_has_and_refuses_others():
    arm = topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi"), hugepages={"64Ki": 1024})
    reserved = [{"numa-node": 0, "memory": "1124Mi", "hugepages-64Ki": "0"}]
    assert kubelet_policy(arm, KubeletSettings.from_dict({"reserved-memory": reserved}))  # arm64's page: no refusal
    err = rejected(arm, **{"reserved-memory": [{"numa-node": 0, "memory": "1124Mi", "hugepages-3Mi": "0"}]})
    assert err.field == "settings.reserved-memory[0].hugepages-3Mi" and "not one a kernel has" in str(err)
