"""The manager part of a kubelet config file (kubelet.config.k8s.io/v1beta1 KubeletConfiguration).

The same policy as `KubeletPolicy.args`, in the config file's camelCase fields; the node stage merges it
with the node's own fields (authentication, TLS, cgroupDriver, runtime endpoint) into
/var/lib/kubelet/config.yaml. A field is left out where the flag form leaves out its flag.
"""

from __future__ import annotations

from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.kubelet_policy import KubeletPolicy
from numalab.model.quantity import format_bytes

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
# The KubeletConfiguration fields this part owns; the node stage takes every other field from elsewhere.
MANAGER_FIELDS = (
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
)


def kubelet_configuration(policy: KubeletPolicy) -> dict[str, Any]:
    """apiVersion, kind and the MANAGER_FIELDS the policy sets, ready to merge and dump as YAML."""
    config: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    config["cpuManagerPolicy"] = policy.cpu_manager_policy
    if policy.cpu_manager_policy_options:
        config["cpuManagerPolicyOptions"] = dict(policy.cpu_manager_policy_options)
    if policy.reserved_cpus:
        config["reservedSystemCPUs"] = format_cpulist(policy.reserved_cpus)
    if policy.memory_manager_policy is not None:
        config["memoryManagerPolicy"] = policy.memory_manager_policy
    if policy.reserved_memory:
        config["reservedMemory"] = [
            {"numaNode": node, "limits": {kind: format_bytes(amount) for kind, amount in kinds.items()}}
            for node, kinds in policy.reserved_memory.items()
        ]
    config["topologyManagerPolicy"] = policy.topology_manager_policy
    if policy.topology_manager_scope is not None:
        config["topologyManagerScope"] = policy.topology_manager_scope
    if policy.topology_manager_policy_options:
        config["topologyManagerPolicyOptions"] = dict(policy.topology_manager_policy_options)
    if policy.kube_reserved:
        config["kubeReserved"] = dict(policy.kube_reserved)
    if policy.system_reserved:
        config["systemReserved"] = dict(policy.system_reserved)
    config["evictionHard"] = dict(policy.eviction_hard)
    if policy.feature_gates:
        config["featureGates"] = dict(policy.feature_gates)
    return config
