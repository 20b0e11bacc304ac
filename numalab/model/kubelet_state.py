"""Which manager checkpoint files a kubelet configuration change makes stale, and what else than the machine
the kubelet compares them with (numalab.model.kubelet_checkpoints compares them with the machine).

The kubelet keeps the policy name and the reservation in cpu_manager_state / memory_manager_state and
refuses to start when they disagree with its new configuration (a CPU checkpoint written under another
policy or without the newly reserved CPUs in its default set; a memory checkpoint whose machine state was
computed from another reserved-memory). Both forms of a configuration are read: kubelet args and the
manager part of a KubeletConfiguration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numa_align.cpulist import CpulistError, parse_cpulist

from numalab.model.errors import ValidationError
from numalab.model.kubelet_checkpoints import CPU_MANAGER_STATE, MEMORY_MANAGER_STATE
from numalab.model.kubelet_policy import KubeletPolicy
from numalab.model.kubelet_reservations import whole_cpus
from numalab.model.quantity import parse_bytes, parse_cpu_millis

# strconv.ParseBool's true values: how the kubelet reads a cpuManagerPolicyOptions value
_GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")

KubeletConfig = Iterable[str] | Mapping[str, Any]


def parse_kubelet_args(args: Iterable[str]) -> dict[str, list[str]]:
    """`["--cpu-manager-policy=static", "reserved-memory=0:memory=1Gi", ...]` -> {name: [values...]}."""
    parsed: dict[str, list[str]] = {}
    for arg in args:
        name, _, value = arg.lstrip("-").partition("=")
        parsed.setdefault(name, []).append(value)
    return parsed


@dataclass(frozen=True)
class _Checkpointed:
    """What the two checkpoint files depend on; absent settings are the kubelet's defaults."""

    cpu_policy: str
    reserved_cpus: frozenset[int] | int  # the CPU list, or the count taken from kube+system-reserved cpu
    memory_policy: str
    reserved_memory: Mapping[int, Mapping[str, int]]


def state_files_to_remove(previous: KubeletConfig, new: KubeletConfig) -> list[str]:
    """The manager state files the kubelet would refuse to start with after moving from previous to new.

    Either side is a kubelet-arg list (dashes optional) or a KubeletConfiguration dict. A state file is
    stale when its manager's policy changes, or under static/Static when its reservation changes.
    """
    old, now = _read(previous, "previous"), _read(new, "new")
    stale = []
    if old.cpu_policy != now.cpu_policy or (now.cpu_policy == "static" and old.reserved_cpus != now.reserved_cpus):
        stale.append(CPU_MANAGER_STATE)
    if old.memory_policy != now.memory_policy or (
        now.memory_policy == "Static" and old.reserved_memory != now.reserved_memory
    ):
        stale.append(MEMORY_MANAGER_STATE)
    return stale


def checkpoint_reservations(policy: KubeletPolicy) -> dict[str, Any]:
    """The reservations the kubelet checks its checkpoints with under `policy`, as keyword arguments of
    kubelet_checkpoints.checkpoint_mismatches: reservedSystemCPUs, the strict-cpu-reservation option,
    reservedMemory."""
    strict = policy.cpu_manager_policy_options.get("strict-cpu-reservation", "false") in _GO_TRUE
    return {"reserved_cpus": frozenset(policy.reserved_cpus), "strict_cpu_reservation": strict,
            "reserved_memory": {node: dict(kinds) for node, kinds in policy.reserved_memory.items()}}


def _read(config: KubeletConfig, where: str) -> _Checkpointed:
    if isinstance(config, Mapping):
        return _from_configuration(config, where)
    if isinstance(config, str):
        raise ValidationError(where, "expected a list of kubelet args or a KubeletConfiguration mapping, got a string")
    return _from_args(parse_kubelet_args(config), where)


def _from_args(args: Mapping[str, list[str]], where: str) -> _Checkpointed:
    def last(name: str, default: str) -> str:
        return args.get(name, [default])[-1]

    def reserved_cpu(name: str) -> tuple[str, str]:
        pairs = dict(kv.partition("=")[::2] for kv in last(name, "").split(",") if kv)
        return f"{where}.{name}.cpu", pairs.get("cpu", "0")

    memory: dict[int, dict[str, int]] = {}
    for value in args.get("reserved-memory", []):
        for entry in filter(None, value.split(";")):
            node, _, amounts = entry.partition(":")
            kinds = dict(kv.partition("=")[::2] for kv in amounts.split(",") if kv)
            _add_memory(memory, node, kinds, f"{where}.reserved-memory")
    return _Checkpointed(
        cpu_policy=last("cpu-manager-policy", "none"),
        reserved_cpus=_cpus(
            args["reserved-cpus"][-1] if "reserved-cpus" in args else None,
            [reserved_cpu("kube-reserved"), reserved_cpu("system-reserved")],
            where,
        ),
        memory_policy=last("memory-manager-policy", "None"),
        reserved_memory=memory,
    )


def _from_configuration(config: Mapping[str, Any], where: str) -> _Checkpointed:
    memory: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(config.get("reservedMemory") or []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("limits"), Mapping):
            raise ValidationError(f"{where}.reservedMemory[{i}]", "expected {numaNode: N, limits: {memory: ...}}")
        _add_memory(memory, entry.get("numaNode"), entry["limits"], f"{where}.reservedMemory[{i}]")
    reserved = [
        (f"{where}.{key}.cpu", (config.get(key) or {}).get("cpu", "0")) for key in ("kubeReserved", "systemReserved")
    ]
    return _Checkpointed(
        cpu_policy=str(config.get("cpuManagerPolicy") or "none"),
        reserved_cpus=_cpus(config.get("reservedSystemCPUs") or None, reserved, where),
        memory_policy=str(config.get("memoryManagerPolicy") or "None"),
        reserved_memory=memory,
    )


def _cpus(cpulist: str | None, reserved: list[tuple[str, str]], where: str) -> frozenset[int] | int:
    if cpulist is not None:
        try:
            return frozenset(parse_cpulist(str(cpulist)))
        except CpulistError as exc:
            raise ValidationError(f"{where}.reserved-cpus", str(exc)) from None
    return whole_cpus(sum(parse_cpu_millis(value, field) for field, value in reserved))


def _add_memory(memory: dict[int, dict[str, int]], node: Any, kinds: Mapping[str, Any], where: str) -> None:
    try:
        number = int(node)
    except (TypeError, ValueError):
        raise ValidationError(where, f"NUMA node {node!r} is not a number") from None
    into = memory.setdefault(number, {})
    for kind, amount in kinds.items():
        size = parse_bytes(amount, f"{where}.{kind}")
        if size:  # memory=0 reserves what leaving the kind out reserves
            into[kind] = into.get(kind, 0) + size
    if not into:
        del memory[number]
