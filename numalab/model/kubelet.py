"""Kubelet policy: the kubelet-arg set for the CPU, Memory and Topology Managers of one node.

Computed from the node's real topology and checked against the rules the kubelet enforces at start-up,
so numa-lab never writes a configuration the kubelet would refuse (static CPU manager without a CPU
reservation, a reserved-memory split that does not add up to Node Allocatable, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist

from numalab.model.errors import ValidationError
from numalab.model.quantity import (
    format_bytes,
    format_millis,
    hugepage_size,
    parse_bytes,
    parse_cpu_millis,
)
from numalab.model.topology import Topology

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
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid", "hugepages-2Mi", "hugepages-1Gi")

CPU_MANAGER_STATE = "/var/lib/kubelet/cpu_manager_state"
MEMORY_MANAGER_STATE = "/var/lib/kubelet/memory_manager_state"

_SETTING_KEYS = (
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


@dataclass(frozen=True)
class KubeletSettings:
    """What the operator asks for; `from_dict` fills the documented defaults for everything left out."""

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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "settings") -> KubeletSettings:
        data = dict(data or {})
        unknown = sorted(set(data) - set(_SETTING_KEYS))
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", f"unknown setting (known: {', '.join(_SETTING_KEYS)})")
        values: dict[str, Any] = {}
        for key in _SETTING_KEYS:
            if key in data:
                values[key.replace("-", "_")] = data[key]
        for key in (
            "cpu-manager-policy-options",
            "topology-manager-policy-options",
            "kube-reserved",
            "system-reserved",
            "eviction-hard",
        ):
            attr = key.replace("-", "_")
            if attr in values:
                values[attr] = _string_map(values[attr], f"{where}.{key}")
        if "eviction_hard" in values:
            values["eviction_hard"] = {**DEFAULT_EVICTION_HARD, **values["eviction_hard"]}
        for key in (
            "cpu_manager_policy",
            "memory_manager_policy",
            "topology_manager_policy",
            "topology_manager_scope",
            "reserved_cpus",
        ):
            if key in values and values[key] is not None and not isinstance(values[key], str | int):
                raise ValidationError(f"{where}.{key.replace('_', '-')}", f"expected a string, got {values[key]!r}")
            if key in values and isinstance(values[key], int):
                values[key] = str(values[key])
        if values.get("reserved_memory") is not None and not isinstance(values["reserved_memory"], list):
            raise ValidationError(f"{where}.reserved-memory", "expected a list of {numa-node: N, memory: ...}")
        return cls(**values)


@dataclass(frozen=True)
class KubeletPolicy:
    """The checked result: kubelet args in RKE2's `kubelet-arg` form (name=value, no leading dashes)."""

    args: tuple[str, ...]
    reserved_cpus: frozenset[int]
    reserved_memory: Mapping[int, Mapping[str, int]]

    @property
    def flags(self) -> list[str]:
        return [f"--{arg}" for arg in self.args]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kubelet_args": list(self.args),
            "reserved_cpus": format_cpulist(self.reserved_cpus),
            "reserved_memory": {
                str(node): {kind: format_bytes(amount) for kind, amount in kinds.items()}
                for node, kinds in self.reserved_memory.items()
            },
        }


def kubelet_policy(topology: Topology, settings: KubeletSettings | None = None) -> KubeletPolicy:
    """Check settings against the topology and compute the kubelet-arg list, or raise ValidationError."""
    s = settings or KubeletSettings()
    _check_choice(s.cpu_manager_policy, CPU_POLICIES, "settings.cpu-manager-policy")
    _check_choice(s.memory_manager_policy, MEMORY_POLICIES, "settings.memory-manager-policy")
    _check_choice(s.topology_manager_policy, TOPOLOGY_POLICIES, "settings.topology-manager-policy")
    _check_choice(s.topology_manager_scope, TOPOLOGY_SCOPES, "settings.topology-manager-scope")
    kube = _reservation(s.kube_reserved, "settings.kube-reserved")
    system = _reservation(s.system_reserved, "settings.system-reserved")
    eviction = _eviction(s.eviction_hard, s.memory_manager_policy, "settings.eviction-hard")

    args: list[str] = [f"cpu-manager-policy={s.cpu_manager_policy}"]
    _check_cpu_options(s)
    if s.cpu_manager_policy_options:
        args.append(f"cpu-manager-policy-options={_join(s.cpu_manager_policy_options)}")
    reserved_cpus = _reserved_cpus(topology, s, kube.get("cpu", 0) + system.get("cpu", 0))
    if reserved_cpus:
        args.append(f"reserved-cpus={format_cpulist(reserved_cpus)}")

    args.append(f"memory-manager-policy={s.memory_manager_policy}")
    reserved_memory = _reserved_memory(topology, s, kube, system, eviction)
    for node, kinds in reserved_memory.items():
        amounts = ",".join(f"{kind}={format_bytes(amount)}" for kind, amount in kinds.items())
        args.append(f"reserved-memory={node}:{amounts}")

    args.append(f"topology-manager-policy={s.topology_manager_policy}")
    args.append(f"topology-manager-scope={s.topology_manager_scope}")
    _check_topology_options(topology, s)
    if s.topology_manager_policy_options:
        args.append(f"topology-manager-policy-options={_join(s.topology_manager_policy_options)}")

    for flag, amounts in (("kube-reserved", kube), ("system-reserved", system)):
        if amounts:
            args.append(f"{flag}={_format_reservation(amounts)}")
    args.append("eviction-hard=" + ",".join(f"{k}<{v}" for k, v in sorted(s.eviction_hard.items())))
    return KubeletPolicy(tuple(args), frozenset(reserved_cpus), reserved_memory)


def parse_kubelet_args(args: Iterable[str]) -> dict[str, list[str]]:
    """`["--cpu-manager-policy=static", "reserved-memory=0:memory=1Gi", ...]` -> {name: [values...]}."""
    parsed: dict[str, list[str]] = {}
    for arg in args:
        name, _, value = arg.lstrip("-").partition("=")
        parsed.setdefault(name, []).append(value)
    return parsed


def state_files_to_remove(previous: Iterable[str], new: Iterable[str]) -> list[str]:
    """The manager state files the kubelet would refuse to start with after moving from previous to new.

    The kubelet keeps the policy name in cpu_manager_state / memory_manager_state and refuses a
    checkpoint written under another policy; only a policy change calls for deleting them.
    """
    old_args, new_args = parse_kubelet_args(previous), parse_kubelet_args(new)

    def policy(args: dict[str, list[str]], name: str, default: str) -> str:
        return args.get(name, [default])[-1]

    stale = []
    if policy(old_args, "cpu-manager-policy", "none") != policy(new_args, "cpu-manager-policy", "none"):
        stale.append(CPU_MANAGER_STATE)
    if policy(old_args, "memory-manager-policy", "None") != policy(new_args, "memory-manager-policy", "None"):
        stale.append(MEMORY_MANAGER_STATE)
    return stale


# -- checks and computations ------------------------------------------------------------------------


def _check_choice(value: str, choices: Sequence[str], where: str) -> None:
    if value not in choices:
        hint = next((c for c in choices if c.lower() == str(value).lower()), None)
        extra = f" (did you mean {hint!r}? the kubelet is case-sensitive)" if hint else ""
        raise ValidationError(where, f"{value!r} is not one of {', '.join(choices)}{extra}")


def _string_map(raw: Any, where: str) -> dict[str, str]:
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


def _reservation(raw: Mapping[str, str], where: str) -> dict[str, int]:
    """kube-/system-reserved as exact integers: cpu in millicores, memory kinds in bytes."""
    out: dict[str, int] = {}
    for kind, value in raw.items():
        if kind not in RESERVABLE:
            raise ValidationError(f"{where}.{kind}", f"cannot reserve {kind!r} (known: {', '.join(RESERVABLE)})")
        if kind == "cpu":
            out[kind] = parse_cpu_millis(value, f"{where}.cpu")
        elif kind == "pid":
            if not str(value).isdigit():
                raise ValidationError(f"{where}.pid", f"expected a whole number of pids, got {value!r}")
            out[kind] = int(value)
        else:
            out[kind] = parse_bytes(value, f"{where}.{kind}")
    return out


def _format_reservation(amounts: Mapping[str, int]) -> str:
    def show(kind: str, amount: int) -> str:
        if kind == "cpu":
            return format_millis(amount)
        return str(amount) if kind == "pid" else format_bytes(amount)

    return ",".join(f"{kind}={show(kind, amount)}" for kind, amount in sorted(amounts.items()))


def _eviction(raw: Mapping[str, str], memory_policy: str, where: str) -> dict[str, int]:
    """Validate eviction-hard; return the absolute memory thresholds in bytes (memory.available)."""
    out: dict[str, int] = {}
    for signal, value in raw.items():
        if signal not in EVICTION_SIGNALS:
            raise ValidationError(
                f"{where}.{signal}", f"unknown eviction signal (known: {', '.join(EVICTION_SIGNALS)})"
            )
        if value.endswith("%"):
            number = value[:-1]
            try:
                percent = float(number)
            except ValueError:
                raise ValidationError(f"{where}.{signal}", f"{value!r} is not a percentage") from None
            if not 0 < percent <= 100:
                raise ValidationError(f"{where}.{signal}", f"{value!r} must be above 0% and at most 100%")
            if signal == "memory.available" and memory_policy == "Static":
                raise ValidationError(
                    f"{where}.{signal}",
                    f"{value!r}: with memory-manager-policy Static give an absolute quantity (e.g. 100Mi), "
                    "so reserved-memory can be made to add up exactly",
                )
        elif signal == "memory.available":
            out["memory"] = parse_bytes(value, f"{where}.{signal}")
        elif signal == "pid.available":
            if not value.isdigit():
                raise ValidationError(f"{where}.{signal}", f"expected a pid count or percentage, got {value!r}")
        else:
            parse_bytes(value, f"{where}.{signal}")
    return out


def _check_cpu_options(s: KubeletSettings) -> None:
    where = "settings.cpu-manager-policy-options"
    if s.cpu_manager_policy_options and s.cpu_manager_policy != "static":
        raise ValidationError(where, "policy options need cpu-manager-policy static")
    for name, value in s.cpu_manager_policy_options.items():
        if name not in CPU_POLICY_OPTIONS:
            raise ValidationError(f"{where}.{name}", f"unknown option (known: {', '.join(CPU_POLICY_OPTIONS)})")
        if value not in ("true", "false"):
            raise ValidationError(f"{where}.{name}", f"expected true or false, got {value!r}")


def _check_topology_options(topology: Topology, s: KubeletSettings) -> None:
    where = "settings.topology-manager-policy-options"
    options = s.topology_manager_policy_options
    if options and s.topology_manager_policy == "none":
        raise ValidationError(where, "policy options need a topology-manager-policy other than none")
    for name, value in options.items():
        if name not in TOPOLOGY_POLICY_OPTIONS:
            raise ValidationError(f"{where}.{name}", f"unknown option (known: {', '.join(TOPOLOGY_POLICY_OPTIONS)})")
        if name == "prefer-closest-numa-nodes" and value not in ("true", "false"):
            raise ValidationError(f"{where}.{name}", f"expected true or false, got {value!r}")
        if name == "max-allowable-numa-nodes" and not (value.isdigit() and int(value) >= 1):
            raise ValidationError(f"{where}.{name}", f"expected a positive whole number, got {value!r}")
    count = len(topology.cells)
    if s.topology_manager_policy != "none" and count > DEFAULT_MAX_NUMA_NODES:
        limit = options.get("max-allowable-numa-nodes")
        if limit is None:
            raise ValidationError(
                f"{where}.max-allowable-numa-nodes",
                f"this node has {count} NUMA nodes; the kubelet refuses more than {DEFAULT_MAX_NUMA_NODES} "
                f"unless max-allowable-numa-nodes is at least {count}",
            )
        if int(limit) < count:
            raise ValidationError(
                f"{where}.max-allowable-numa-nodes", f"{limit} is below this node's {count} NUMA nodes"
            )


def _reserved_cpus(topology: Topology, s: KubeletSettings, reserved_millis: int) -> list[int]:
    where = "settings.reserved-cpus"
    if s.reserved_cpus is not None:
        try:
            cpus = parse_cpulist(s.reserved_cpus)
        except CpulistError as exc:
            raise ValidationError(where, str(exc)) from None
        unknown = cpus - topology.cpus
        if unknown:
            raise ValidationError(
                where, f"cpu(s) {format_cpulist(unknown)} are not on this node (cpus: {format_cpulist(topology.cpus)})"
            )
        if not cpus and s.cpu_manager_policy == "static":
            raise ValidationError(where, "is empty; the static CPU manager needs at least one reserved CPU")
        if cpus == topology.cpus:
            raise ValidationError(where, "reserves every CPU of the node; pods would have none")
        return sorted(cpus)
    if s.cpu_manager_policy != "static":
        return []
    if reserved_millis <= 0:
        raise ValidationError(
            "settings.kube-reserved.cpu",
            "the static CPU manager needs kube-reserved cpu + system-reserved cpu > 0, or reserved-cpus",
        )
    count = -(-reserved_millis // 1000)  # whole CPUs, rounded up as the kubelet does
    if count >= len(topology.cpus):
        raise ValidationError(
            "settings.kube-reserved.cpu",
            f"reserving {format_millis(reserved_millis)} CPU takes {count} of the node's {len(topology.cpus)} "
            "CPUs and leaves none for pods",
        )
    chosen: list[int] = []
    for cell in topology.cells:
        chosen.extend(sorted(cell.cpus)[: count - len(chosen)])
        if len(chosen) == count:
            break
    return chosen


def _memory_kinds(topology: Topology) -> dict[str, dict[int, int]]:
    """Per memory type, what each cell can hold: regular memory excludes the cell's hugepages."""
    kinds: dict[str, dict[int, int]] = {"memory": {}}
    for cell in topology.cells:
        pages = 0
        for size in cell.hugepages:
            pages += cell.hugepage_bytes(size)
            kinds.setdefault(f"hugepages-{size}", {})[cell.id] = cell.hugepage_bytes(size)
        kinds["memory"][cell.id] = cell.memory - pages
    return kinds


def _reserved_memory(
    topology: Topology,
    s: KubeletSettings,
    kube: Mapping[str, int],
    system: Mapping[str, int],
    eviction: Mapping[str, int],
) -> dict[int, dict[str, int]]:
    if s.memory_manager_policy != "Static":
        if s.reserved_memory:
            raise ValidationError("settings.reserved-memory", "only applies with memory-manager-policy Static")
        return {}
    required = {"memory": kube.get("memory", 0) + system.get("memory", 0) + eviction.get("memory", 0)}
    for kind in ("hugepages-2Mi", "hugepages-1Gi"):
        total = kube.get(kind, 0) + system.get(kind, 0)
        if total:
            required[kind] = total
    if required["memory"] <= 0:
        raise ValidationError(
            "settings.kube-reserved.memory",
            "memory-manager-policy Static needs a memory reservation > 0 "
            "(kube-reserved + system-reserved + eviction-hard memory.available)",
        )
    capacity = _memory_kinds(topology)
    if s.reserved_memory is not None:
        split = _explicit_split(topology, s.reserved_memory, capacity)
        _check_sums(split, required)
        return split
    split: dict[int, dict[str, int]] = {}
    for kind, amount in required.items():
        remaining = amount
        for cell in topology.cells:
            take = min(remaining, capacity.get(kind, {}).get(cell.id, 0))
            if take:
                split.setdefault(cell.id, {})[kind] = take
                remaining -= take
            if not remaining:
                break
        if remaining:
            raise ValidationError(
                "settings.kube-reserved.memory" if kind == "memory" else f"settings.kube-reserved.{kind}",
                f"the reservation of {format_bytes(amount)} {kind} does not fit in the node's cells",
            )
    return dict(sorted(split.items()))


def _explicit_split(
    topology: Topology, raw: Sequence[Mapping[str, Any]], capacity: Mapping[str, Mapping[int, int]]
) -> dict[int, dict[str, int]]:
    split: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(raw):
        where = f"settings.reserved-memory[{i}]"
        if not isinstance(entry, Mapping) or "numa-node" not in entry:
            raise ValidationError(where, "expected {numa-node: N, memory: QUANTITY, ...}")
        node = entry["numa-node"]
        if node not in topology.ids:
            raise ValidationError(
                f"{where}.numa-node", f"NUMA node {node!r} does not exist (nodes: {format_cpulist(topology.ids)})"
            )
        if node in split:
            raise ValidationError(f"{where}.numa-node", f"NUMA node {node} is listed twice")
        split[node] = {}
        for kind, value in entry.items():
            if kind == "numa-node":
                continue
            if kind != "memory":
                if not kind.startswith("hugepages-"):
                    raise ValidationError(f"{where}.{kind}", "expected memory or hugepages-<size>")
                hugepage_size(kind, f"{where}.{kind}")
            amount = parse_bytes(value, f"{where}.{kind}")
            room = capacity.get(kind, {}).get(node, 0)
            if amount > room:
                raise ValidationError(
                    f"{where}.{kind}",
                    f"{format_bytes(amount)} exceeds the {format_bytes(room)} of {kind} NUMA node {node} has",
                )
            if amount:
                split[node][kind] = amount
    return dict(sorted((node, kinds) for node, kinds in split.items() if kinds))


def _check_sums(split: Mapping[int, Mapping[str, int]], required: Mapping[str, int]) -> None:
    kinds = set(required) | {kind for kinds in split.values() for kind in kinds}
    for kind in sorted(kinds):
        total = sum(kinds_.get(kind, 0) for kinds_ in split.values())
        want = required.get(kind, 0)
        if total != want:
            raise ValidationError(
                "settings.reserved-memory",
                f"{kind} adds up to {format_bytes(total)} but kube-reserved + system-reserved"
                f"{' + eviction-hard memory.available' if kind == 'memory' else ''} is {format_bytes(want)}; "
                "the kubelet refuses to start unless they are equal",
            )


def _join(options: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(options.items()))
