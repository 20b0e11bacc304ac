"""Kubelet policy: the CPU, Memory and Topology Manager configuration of one node for one kubelet version.

Computed from the node's real topology and checked against the rules the kubelet enforces at start-up,
so numa-lab never writes a configuration the kubelet would refuse (static CPU manager without a CPU
reservation, a reserved-memory split that does not add up to Node Allocatable, an option that kubelet
version does not have, ...). `KubeletPolicy.args` and `kubelet_configuration()` render the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.errors import ValidationError
from numalab.model.kubelet_reservations import (
    eviction_thresholds,
    format_reservation,
    reservation,
    reserved_cpus,
    reserved_memory,
)
from numalab.model.kubelet_settings import (
    CPU_POLICIES,
    CPU_POLICY_OPTIONS,
    DEFAULT_MAX_NUMA_NODES,
    MEMORY_POLICIES,
    TOPOLOGY_POLICIES,
    TOPOLOGY_POLICY_OPTIONS,
    TOPOLOGY_SCOPES,
    KubeletSettings,
)
from numalab.model.kubelet_shape import check_cgroup, check_cpu_options_shape
from numalab.model.kubelet_versions import KubeletVersion, check_known, first_version, gates_for, removed_flags, stage
from numalab.model.quantity import format_bytes
from numalab.model.topology import Topology


@dataclass(frozen=True)
class KubeletPolicy:
    """The checked result. A manager setting is None when that kubelet lacks it and the kubelet's only
    behaviour is what was asked (memory-manager-policy None before 1.21, container scope before 1.20)."""

    kubelet_version: KubeletVersion
    cpu_manager_policy: str
    cpu_manager_policy_options: Mapping[str, str]
    reserved_cpus: frozenset[int]
    memory_manager_policy: str | None
    reserved_memory: Mapping[int, Mapping[str, int]]
    topology_manager_policy: str
    topology_manager_scope: str | None
    topology_manager_policy_options: Mapping[str, str]
    kube_reserved: Mapping[str, str]
    system_reserved: Mapping[str, str]
    eviction_hard: Mapping[str, str]
    feature_gates: Mapping[str, bool]

    @property
    def args(self) -> tuple[str, ...]:
        """Kubelet args in RKE2's `kubelet-arg` form (name=value, no leading dashes)."""
        args = [f"cpu-manager-policy={self.cpu_manager_policy}"]
        if self.cpu_manager_policy_options:
            args.append(f"cpu-manager-policy-options={_join(self.cpu_manager_policy_options)}")
        if self.reserved_cpus:
            args.append(f"reserved-cpus={format_cpulist(self.reserved_cpus)}")
        if self.memory_manager_policy is not None:
            args.append(f"memory-manager-policy={self.memory_manager_policy}")
        for node, kinds in self.reserved_memory.items():
            amounts = ",".join(f"{kind}={format_bytes(amount)}" for kind, amount in kinds.items())
            args.append(f"reserved-memory={node}:{amounts}")
        args.append(f"topology-manager-policy={self.topology_manager_policy}")
        if self.topology_manager_scope is not None:
            args.append(f"topology-manager-scope={self.topology_manager_scope}")
        if self.topology_manager_policy_options:
            args.append(f"topology-manager-policy-options={_join(self.topology_manager_policy_options)}")
        for flag, amounts in (("kube-reserved", self.kube_reserved), ("system-reserved", self.system_reserved)):
            if amounts:
                args.append(f"{flag}={_join(amounts)}")
        args.append("eviction-hard=" + ",".join(f"{k}<{v}" for k, v in sorted(self.eviction_hard.items())))
        if self.feature_gates:
            args.append("feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in self.feature_gates.items()))
        return tuple(args)

    @property
    def flags(self) -> list[str]:
        return [f"--{arg}" for arg in self.args]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kubelet_version": str(self.kubelet_version),
            "kubelet_args": list(self.args),
            "reserved_cpus": format_cpulist(self.reserved_cpus),
            "reserved_memory": {
                str(node): {kind: format_bytes(amount) for kind, amount in kinds.items()}
                for node, kinds in self.reserved_memory.items()
            },
            "feature_gates": dict(self.feature_gates),
        }


def kubelet_policy(
    topology: Topology,
    settings: KubeletSettings | None = None,
    *,
    allow_newer: bool = False,
    cgroup_version: int | None = None,
) -> KubeletPolicy:
    """Check settings against the topology, the kubelet version and the host, or raise ValidationError.

    allow_newer applies the newest known version's rules to a kubelet newer than numa-lab knows;
    cgroup_version (1 or 2, None when unknown) is the host's, which kubelets from 1.35 require to be 2.
    """
    s = settings or KubeletSettings()
    version = s.kubelet_version
    check_known(version, allow_newer)
    check_cgroup(version, cgroup_version)
    _check_choice(s.cpu_manager_policy, CPU_POLICIES, "settings.cpu-manager-policy")
    _check_choice(s.memory_manager_policy, MEMORY_POLICIES, "settings.memory-manager-policy")
    _check_choice(s.topology_manager_policy, TOPOLOGY_POLICIES, "settings.topology-manager-policy")
    _check_choice(s.topology_manager_scope, TOPOLOGY_SCOPES, "settings.topology-manager-scope")
    kube = reservation(s.kube_reserved, "settings.kube-reserved")
    system = reservation(s.system_reserved, "settings.system-reserved")
    eviction = eviction_thresholds(s.eviction_hard, s.memory_manager_policy, "settings.eviction-hard")
    gates: set[str] = set()

    def need(feature: str, what: str) -> None:
        gates.update(gates_for(feature, version, f"settings.{feature}", what))

    if s.cpu_manager_policy_options and s.cpu_manager_policy != "static":
        raise ValidationError("settings.cpu-manager-policy-options", "policy options need cpu-manager-policy static")
    _check_options(s.cpu_manager_policy_options, CPU_POLICY_OPTIONS, "cpu-manager-policy-options", need)
    check_cpu_options_shape(topology, s)
    cpus = reserved_cpus(topology, s, kube.get("cpu", 0) + system.get("cpu", 0))

    memory_policy: str | None = s.memory_manager_policy
    if memory_policy == "Static":
        need("memory-manager-policy", "memory-manager-policy Static")
    elif stage("memory-manager-policy", version) is None:
        memory_policy = None
    split = reserved_memory(topology, s, kube, system, eviction)

    if s.topology_manager_policy != "none":
        need("topology-manager-policy", f"topology-manager-policy {s.topology_manager_policy}")
    scope: str | None = s.topology_manager_scope
    if scope == "pod":
        need("topology-manager-scope", "topology-manager-scope pod")
    elif stage("topology-manager-scope", version) is None:
        scope = None
    if s.topology_manager_policy_options and s.topology_manager_policy == "none":
        raise ValidationError(
            "settings.topology-manager-policy-options", "policy options need a topology-manager-policy other than none"
        )
    _check_options(s.topology_manager_policy_options, TOPOLOGY_POLICY_OPTIONS, "topology-manager-policy-options", need)
    _check_numa_node_limit(topology, s, version)

    policy = KubeletPolicy(
        kubelet_version=version,
        cpu_manager_policy=s.cpu_manager_policy,
        cpu_manager_policy_options=dict(sorted(s.cpu_manager_policy_options.items())),
        reserved_cpus=frozenset(cpus),
        memory_manager_policy=memory_policy,
        reserved_memory=split,
        topology_manager_policy=s.topology_manager_policy,
        topology_manager_scope=scope,
        topology_manager_policy_options=dict(sorted(s.topology_manager_policy_options.items())),
        kube_reserved=format_reservation(kube),
        system_reserved=format_reservation(system),
        eviction_hard=dict(sorted(s.eviction_hard.items())),
        feature_gates=dict.fromkeys(sorted(gates), True),
    )
    stale = removed_flags(policy.args, version)
    if stale:  # a guard on this module: the table says kubelet `version` would refuse to start
        raise ValidationError("settings.kubelet-version", f"kubelet {version} no longer has the flag(s) {stale}")
    return policy


def _check_choice(value: str, choices: Sequence[str], where: str) -> None:
    if value not in choices:
        hint = next((c for c in choices if c.lower() == str(value).lower()), None)
        extra = f" (did you mean {hint!r}? the kubelet is case-sensitive)" if hint else ""
        raise ValidationError(where, f"{value!r} is not one of {', '.join(choices)}{extra}")


def _check_options(
    options: Mapping[str, str], known: Sequence[str], setting: str, need: Callable[[str, str], None]
) -> None:
    """Each option must be one the kubelet knows, with a value it parses, in a version that has it."""
    if options:
        need(setting, setting)
    for name, value in options.items():
        where = f"settings.{setting}.{name}"
        if name not in known:
            raise ValidationError(where, f"unknown option (known: {', '.join(known)})")
        if name == "max-allowable-numa-nodes":
            if not (value.isdigit() and int(value) >= 1):
                raise ValidationError(where, f"expected a positive whole number, got {value!r}")
        elif value not in ("true", "false"):
            raise ValidationError(where, f"expected true or false, got {value!r}")
        need(f"{setting}.{name}", f"{setting} {name}")


def _check_numa_node_limit(topology: Topology, s: KubeletSettings, version: KubeletVersion) -> None:
    """The Topology Manager refuses to start on a node with more NUMA nodes than its limit."""
    where = "settings.topology-manager-policy-options"
    options = s.topology_manager_policy_options
    count = len(topology.cells)
    if s.topology_manager_policy == "none" or count <= DEFAULT_MAX_NUMA_NODES:
        return
    limit = options.get("max-allowable-numa-nodes")
    feature = "topology-manager-policy-options.max-allowable-numa-nodes"
    if limit is None and stage(feature, version) is None:
        raise ValidationError(
            "settings.topology-manager-policy",
            f"this node has {count} NUMA nodes; kubelet {version} refuses more than {DEFAULT_MAX_NUMA_NODES} "
            f"with a topology-manager-policy other than none (max-allowable-numa-nodes, which raises the limit, "
            f"needs kubelet {first_version(feature)} or newer)",
        )
    if limit is None:
        raise ValidationError(
            f"{where}.max-allowable-numa-nodes",
            f"this node has {count} NUMA nodes; the kubelet refuses more than {DEFAULT_MAX_NUMA_NODES} "
            f"unless max-allowable-numa-nodes is at least {count}",
        )
    if int(limit) < count:
        raise ValidationError(f"{where}.max-allowable-numa-nodes", f"{limit} is below this node's {count} NUMA nodes")


def _join(options: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(options.items()))
