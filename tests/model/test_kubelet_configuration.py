"""The KubeletConfiguration form says what the args say, in the v1beta1 field names."""

import pytest
import yaml

from numalab.model.kubelet import (
    MANAGER_FIELDS,
    KubeletSettings,
    kubelet_configuration,
    kubelet_policy,
    parse_kubelet_args,
    state_files_to_remove,
)
from numalab.model.quantity import parse_bytes
from numalab.model.topology import Topology

# json tags of k8s.io/kubelet/config/v1beta1 KubeletConfiguration (v0.36.3) for the managers' part
V1BETA1_FIELDS = {
    "apiVersion",
    "kind",
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "reservedSystemCPUs",
    "memoryManagerPolicy",
    "reservedMemory",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "kubeReserved",
    "systemReserved",
    "evictionHard",
    "featureGates",
}


def topo(*cells, **extra):
    return Topology.from_dict({"cells": [{"id": i, "cpus": c, "memory": m, **extra} for i, c, m in cells]})


CASES = {
    "two cells, defaults": (topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi")), {}),
    "small cells spill over": (
        topo((0, "0-1", "1Gi"), (1, "2-3", "2Gi")),
        {"kube-reserved": {"cpu": "1", "memory": "1Gi"}, "system-reserved": {"memory": "256Mi"}},
    ),
    "hugepages reserved": (
        topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi"), hugepages={"2Mi": 512}),
        {"kube-reserved": {"cpu": "1", "memory": "1Gi"}, "system-reserved": {}},
    ),
    "explicit split and options": (
        topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi")),
        {
            "reserved-memory": [{"numa-node": 0, "memory": "1000Mi"}, {"numa-node": 1, "memory": "124Mi"}],
            "reserved-cpus": "0,4",
            "cpu-manager-policy-options": {"full-pcpus-only": "true", "align-by-socket": "true"},
            "topology-manager-policy": "restricted",
            "topology-manager-policy-options": {"prefer-closest-numa-nodes": "true"},
            "topology-manager-scope": "container",
        },
    ),
    "ten cells": (
        topo(*[(i, str(i), "1Gi") for i in range(10)]),
        {"topology-manager-policy-options": {"max-allowable-numa-nodes": 10}, "kubelet-version": "v1.31.4+rke2r1"},
    ),
    "1.21 with its gate": (topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi")), {"kubelet-version": "v1.21.14"}),
    "1.19, no memory manager": (
        topo((0, "0-3", "4Gi")),
        {"kubelet-version": "v1.19.16", "memory-manager-policy": "None", "topology-manager-scope": "container"},
    ),
    "no managers": (
        topo((0, "0-3", "4Gi")),
        {"cpu-manager-policy": "none", "memory-manager-policy": "None", "topology-manager-policy": "none"},
    ),
}


def pairs(text, sep):
    return dict(item.split(sep, 1) for item in text.split(",")) if text else {}


def config_from_args(args):
    """Read the arg form back, independently of kubelet_configuration, into the config form's shape."""
    parsed = {name: values[-1] for name, values in parse_kubelet_args(args).items()}
    names = {
        "cpu-manager-policy": "cpuManagerPolicy",
        "reserved-cpus": "reservedSystemCPUs",
        "memory-manager-policy": "memoryManagerPolicy",
        "topology-manager-policy": "topologyManagerPolicy",
        "topology-manager-scope": "topologyManagerScope",
    }
    config = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    config |= {field: parsed[flag] for flag, field in names.items() if flag in parsed}
    maps = {
        "cpu-manager-policy-options": "cpuManagerPolicyOptions",
        "topology-manager-policy-options": "topologyManagerPolicyOptions",
        "kube-reserved": "kubeReserved",
        "system-reserved": "systemReserved",
    }
    config |= {field: pairs(parsed[flag], "=") for flag, field in maps.items() if flag in parsed}
    config["evictionHard"] = pairs(parsed["eviction-hard"], "<")
    if "feature-gates" in parsed:
        config["featureGates"] = {k: v == "true" for k, v in pairs(parsed["feature-gates"], "=").items()}
    reserved = []
    for value in parse_kubelet_args(args).get("reserved-memory", []):
        node, _, amounts = value.partition(":")
        reserved.append({"numaNode": int(node), "limits": pairs(amounts, "=")})
    if reserved:
        config["reservedMemory"] = reserved
    return config


@pytest.mark.parametrize("case", sorted(CASES))
def test_args_and_configuration_say_the_same(case):
    topology, settings = CASES[case]
    policy = kubelet_policy(topology, KubeletSettings.from_dict(settings))
    config = kubelet_configuration(policy)
    assert config == config_from_args(policy.args)
    assert set(config) <= V1BETA1_FIELDS and set(config) - {"apiVersion", "kind"} <= set(MANAGER_FIELDS)
    assert yaml.safe_load(yaml.safe_dump(config)) == config
    # the reset detector reads both forms the same way
    assert state_files_to_remove(policy.args, config) == [] and state_files_to_remove(config, policy.flags) == []
    if policy.memory_manager_policy == "Static":
        reserved = sum(parse_bytes(e["limits"]["memory"]) for e in config["reservedMemory"])
        parts = (config.get("kubeReserved", {}), config.get("systemReserved", {}))
        wanted = sum(parse_bytes(part.get("memory", "0")) for part in parts)
        assert reserved == wanted + parse_bytes(config["evictionHard"]["memory.available"])


def test_default_configuration_exactly():
    policy = kubelet_policy(topo((0, "0-3", "4Gi"), (1, "4-7", "4Gi")))
    assert kubelet_configuration(policy) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
        "kubeReserved": {"cpu": "500m", "memory": "512Mi"},
        "systemReserved": {"cpu": "500m", "memory": "512Mi"},
        "evictionHard": {
            "imagefs.available": "15%",
            "memory.available": "100Mi",
            "nodefs.available": "10%",
            "nodefs.inodesFree": "5%",
        },
    }


def test_hugepages_and_gates_in_configuration():
    topology, settings = CASES["hugepages reserved"]
    config = kubelet_configuration(kubelet_policy(topology, KubeletSettings.from_dict(settings)))
    assert config["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
    assert config["kubeReserved"] == {"cpu": "1", "memory": "1Gi"}
    assert "systemReserved" not in config
    topology, settings = CASES["explicit split and options"]
    config = kubelet_configuration(kubelet_policy(topology, KubeletSettings.from_dict(settings)))
    assert config["featureGates"] == {"CPUManagerPolicyAlphaOptions": True}
    assert config["cpuManagerPolicyOptions"] == {"align-by-socket": "true", "full-pcpus-only": "true"}
    assert config["reservedSystemCPUs"] == "0,4"
