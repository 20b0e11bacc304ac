"""The kubelet's manager checkpoint files read as the kubelet reads them, for numalab.model.kubelet_checkpoints.

The formats are the kubelet's structs (v1.36: pkg/kubelet/cm/cpumanager/state/checkpoint.go
CPUManagerCheckpoint, pkg/kubelet/cm/memorymanager/state/checkpoint.go MemoryManagerCheckpointV1 and
state.go; PodLevelResourceManagers is off by default, so podEntries are ignored) decoded as Go's
encoding/json does: keys matched regardless of case, null leaves the zero value, a number of the wrong kind
or a cpuset cpuset.Parse refuses is an error (the kubelet would refuse the file: "could not restore state
from checkpoint"). The checksum is not verified: the kubelet's is a hash of Go's printed struct. Standard
library only, like the guard that ships it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from numa_align.cpulist import CpulistError, parse_cpulist

UINT64 = 2**64
"""The kubelet keeps memory sizes in uint64: a reservation above the total wraps around, as there."""
_TABLE_FIELDS = ("total", "systemReserved", "allocatable", "reserved", "free")


class CheckpointError(ValueError):
    """A checkpoint the kubelet could not read: not JSON, or a field of the wrong type."""


def read_cpu_checkpoint(text: str) -> tuple[str, frozenset[int], dict[tuple[str, str], frozenset[int]]]:
    """The kubelet's CPUManagerCheckpoint (v2): policyName, defaultCpuSet, entries {pod: {container: cpuset}}."""
    document = _object(text)
    policy = _typed(_get(document, "policyName"), str, "policyName")
    default = _cpuset(_typed(_get(document, "defaultCpuSet"), str, "defaultCpuSet"), "defaultCpuSet")
    assignments = {}
    for pod, containers in _typed(_get(document, "entries"), dict, "entries").items():
        for container, cpus in _typed(containers, dict, f"entries.{pod}").items():
            where = f"entries.{pod}.{container}"
            assignments[(pod, container)] = _cpuset(_typed(cpus, str, where), where)
    return policy, default, assignments


def read_memory_checkpoint(text: str) -> tuple[str, dict[int, dict], list[tuple[str, dict]]]:
    """The kubelet's MemoryManagerCheckpoint (v1, read while PodLevelResourceManagers is off): policyName,
    machineState {node: {numberOfAssignments, memoryMap {resource: table}, cells}}, entries {pod: {container:
    [{numaAffinity, type, size}]}}."""
    document = _object(text)
    policy = _typed(_get(document, "policyName"), str, "policyName")
    state: dict[int, dict] = {}
    for key, node in _typed(_get(document, "machineState"), dict, "machineState").items():
        where = f"machineState.{key}"
        node = _typed(node, dict, where)
        tables = {}
        for name, table in _typed(_get(node, "memoryMap"), dict, f"{where}.memoryMap").items():
            table = _typed(table, dict, f"{where}.memoryMap.{name}")
            tables[name] = {k: _uint(_get(table, k), f"{where}.memoryMap.{name}.{k}") for k in _TABLE_FIELDS}
        state[_node_key(key, where)] = {
            "numberOfAssignments": _integer(_get(node, "numberOfAssignments"), f"{where}.numberOfAssignments"),
            "memoryMap": tables,
            "cells": _integers(_get(node, "cells"), f"{where}.cells"),
        }
    blocks = []
    for pod, containers in _typed(_get(document, "entries"), dict, "entries").items():
        for container, listed in _typed(containers, dict, f"entries.{pod}").items():
            for i, block in enumerate(_typed(listed, list, f"entries.{pod}.{container}")):
                where = f"entries.{pod}.{container}[{i}]"
                block = _typed(block, dict, where)
                blocks.append((f"pod {pod} container {container}", {
                    "numaAffinity": _integers(_get(block, "numaAffinity"), f"{where}.numaAffinity"),
                    "type": _typed(_get(block, "type"), str, f"{where}.type"),
                    "size": _uint(_get(block, "size"), f"{where}.size"),
                }))
    return policy, state, blocks


def _get(document: Mapping[str, Any], name: str) -> Any:
    """A struct field as encoding/json fills it: from every key equal to its name but for case, the last."""
    matches = [value for key, value in document.items() if key.lower() == name.lower()]
    return matches[-1] if matches else None


def _object(text: str) -> dict:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CheckpointError(f"not JSON: {exc}" if text.strip() else "the file is empty") from None
    return _typed(document, dict, "the file")


def _typed(value: Any, kind: type, where: str) -> Any:
    """`value` as Go's encoding/json would take it into a field of that kind: null leaves the zero value."""
    if value is None:
        return kind()
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CheckpointError(f"{where} is {json.dumps(value)[:40]}, not a JSON {_JSON_NAMES[kind]}")
    return value


_JSON_NAMES = {str: "string", dict: "object", list: "array", int: "integer"}


def _integer(value: Any, where: str) -> int:
    return _typed(value, int, where)


def _uint(value: Any, where: str) -> int:
    number = _integer(value, where)
    if not 0 <= number < UINT64:
        raise CheckpointError(f"{where} is {number}, not an unsigned 64-bit number")
    return number


def _integers(value: Any, where: str) -> list[int]:
    return [_integer(item, f"{where}[{i}]") for i, item in enumerate(_typed(value, list, where))]


def _node_key(key: str, where: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise CheckpointError(f"{where}: {key!r} is not a NUMA node id") from None


def _cpuset(text: str, where: str) -> frozenset[int]:
    """cpuset.Parse: "" is the empty set; no spaces (strconv.Atoi refuses them)."""
    try:
        if text != text.strip() or " " in text:
            raise CpulistError(f"{text!r} has spaces")
        return parse_cpulist(text)
    except CpulistError as exc:
        raise CheckpointError(f"{where}: {exc}") from None
