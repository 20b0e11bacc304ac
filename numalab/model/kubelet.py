"""Kubelet policy for the CPU, Memory and Topology Managers of one node: the public names in one place.

The work is split by what it holds: kubelet_settings (what the operator asks, defaults), kubelet_versions
(which kubelet accepts what), kubelet_reservations (reserved CPUs and memory), kubelet_policy (the checked
result and its args), kubelet_configuration (the same as a KubeletConfiguration), kubelet_state (which
manager checkpoint files a change makes stale).
"""

from numalab.model.kubelet_configuration import MANAGER_FIELDS, kubelet_configuration
from numalab.model.kubelet_policy import KubeletPolicy, kubelet_policy
from numalab.model.kubelet_settings import (
    CPU_POLICIES,
    CPU_POLICY_OPTIONS,
    DEFAULT_EVICTION_HARD,
    DEFAULT_KUBE_RESERVED,
    DEFAULT_MAX_NUMA_NODES,
    DEFAULT_SYSTEM_RESERVED,
    EVICTION_SIGNALS,
    MEMORY_POLICIES,
    RESERVABLE,
    TOPOLOGY_POLICIES,
    TOPOLOGY_POLICY_OPTIONS,
    TOPOLOGY_SCOPES,
    KubeletSettings,
)
from numalab.model.kubelet_state import (
    CPU_MANAGER_STATE,
    MEMORY_MANAGER_STATE,
    parse_kubelet_args,
    state_files_to_remove,
)
from numalab.model.kubelet_versions import (
    NEWEST_KNOWN,
    OLDEST_KNOWN,
    KubeletVersion,
    fails_on_cgroup_v1,
    removed_flags,
)

__all__ = [
    "CPU_MANAGER_STATE",
    "CPU_POLICIES",
    "CPU_POLICY_OPTIONS",
    "DEFAULT_EVICTION_HARD",
    "DEFAULT_KUBE_RESERVED",
    "DEFAULT_MAX_NUMA_NODES",
    "DEFAULT_SYSTEM_RESERVED",
    "EVICTION_SIGNALS",
    "MANAGER_FIELDS",
    "MEMORY_MANAGER_STATE",
    "MEMORY_POLICIES",
    "NEWEST_KNOWN",
    "OLDEST_KNOWN",
    "RESERVABLE",
    "TOPOLOGY_POLICIES",
    "TOPOLOGY_POLICY_OPTIONS",
    "TOPOLOGY_SCOPES",
    "KubeletPolicy",
    "KubeletSettings",
    "KubeletVersion",
    "fails_on_cgroup_v1",
    "kubelet_configuration",
    "kubelet_policy",
    "parse_kubelet_args",
    "removed_flags",
    "state_files_to_remove",
]
