"""What the operator asks of the kubelet's managers, the names the kubelet accepts, and numa-lab's defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalab.model.errors import ValidationError
from numalab.model.kubelet_versions import NEWEST_KNOWN, KubeletVersion

CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CPU_POLICY_OPTIONS = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
)
TOPOLOGY_POLICY_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
# The kubelet refuses more NUMA nodes than this unless max-allowable-numa-nodes raises the limit.
DEFAULT_MAX_NUMA_NODES = 8
EVICTION_SIGNALS = (
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
# The kubelet's own Linux defaults. RKE2 replaces them with a list that lacks memory.available, and any
# explicit eviction-hard drops the thresholds it does not name, so numa-lab always writes all of them.
DEFAULT_EVICTION_HARD = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "imagefs.available": "15%",
    "nodefs.inodesFree": "5%",
}
DEFAULT_KUBE_RESERVED = {"cpu": "500m", "memory": "512Mi"}
DEFAULT_SYSTEM_RESERVED = {"cpu": "500m", "memory": "512Mi"}
# What kube-reserved / system-reserved take: the kubelet refuses anything else ("cannot reserve ..."), hugepages too.
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")

_SETTING_KEYS = (
    "kubelet-version",
    "cpu-manager-policy",
    "cpu-manager-policy-options",
    "memory-manager-policy",
    "topology-manager-policy",
    "topology-manager-scope",
    "topology-manager-policy-options",
    "kube-reserved",
    "system-reserved",
    "eviction-hard",
    "reserved-cpus",
    "reserved-memory",
)
_MAP_KEYS = (
    "cpu-manager-policy-options",
    "topology-manager-policy-options",
    "kube-reserved",
    "system-reserved",
    "eviction-hard",
)
_STRING_KEYS = (
    "cpu-manager-policy",
    "memory-manager-policy",
    "topology-manager-policy",
    "topology-manager-scope",
    "reserved-cpus",
)


@dataclass(frozen=True)
class KubeletSettings:
    """What the operator asks for; `from_dict` fills the documented defaults for everything left out.

    kubelet_version is the kubelet the settings are for (default: the newest numa-lab knows); the policy
    emits only what that kubelet accepts.
    """

    cpu_manager_policy: str = "static"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    memory_manager_policy: str = "Static"
    topology_manager_policy: str = "single-numa-node"
    topology_manager_scope: str = "pod"
    topology_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    kube_reserved: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_KUBE_RESERVED))
    system_reserved: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SYSTEM_RESERVED))
    eviction_hard: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))
    reserved_cpus: str | None = None
    reserved_memory: Sequence[Mapping[str, Any]] | None = None
    kubelet_version: KubeletVersion = NEWEST_KNOWN

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "settings") -> KubeletSettings:
        data = dict(data or {})
        unknown = sorted(set(data) - set(_SETTING_KEYS))
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", f"unknown setting (known: {', '.join(_SETTING_KEYS)})")
        values: dict[str, Any] = {key.replace("-", "_"): data[key] for key in _SETTING_KEYS if key in data}
        for key in _MAP_KEYS:
            attr = key.replace("-", "_")
            if attr in values:
                values[attr] = string_map(values[attr], f"{where}.{key}")
        if "eviction_hard" in values:
            values["eviction_hard"] = {**DEFAULT_EVICTION_HARD, **values["eviction_hard"]}
        for key in _STRING_KEYS:
            attr = key.replace("-", "_")
            if attr in values and values[attr] is not None and not isinstance(values[attr], str | int):
                raise ValidationError(f"{where}.{key}", f"expected a string, got {values[attr]!r}")
            if attr in values and isinstance(values[attr], int):
                values[attr] = str(values[attr])
        if values.get("reserved_memory") is not None and not isinstance(values["reserved_memory"], list):
            raise ValidationError(f"{where}.reserved-memory", "expected a list of {numa-node: N, memory: ...}")
        if "kubelet_version" in values:
            values["kubelet_version"] = KubeletVersion.parse(values["kubelet_version"], f"{where}.kubelet-version")
        return cls(**values)


def string_map(raw: Any, where: str) -> dict[str, str]:
    """A settings mapping with string values (YAML booleans and numbers become the kubelet's spelling)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping, got {raw!r}")
    out = {}
    for key, value in raw.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str | int):
            raise ValidationError(f"{where}.{key}", f"expected a string or number, got {value!r}")
        out[str(key)] = str(value)
    return out
