"""A simulated fleet: which server shapes, how many of each, expanded (seeded) into one description per node.

    nodes: 1000
    seed: 7
    shapes:
      - {shape: 2cell-16, weight: 3}
      - {shape: 4cell-smt-64, weight: 1, settings: {topology-manager-scope: container}}
      - {shape: 3cell-memonly-24, count: 5}

A shape is a real server's NUMA shape in numa-lab's inventory form (numalab.model.topology_data) with the
kubelet settings and numa-align settings such a server gets; `settings` in an entry overrides the shape's
kubelet settings. Each node carries the kubelet policy numa-lab computes for it (kubelet_policy), so the fleet
is what numa-lab would deploy, refused the same way. Counts are exact; weights share the nodes left over by
largest remainder; the order of shapes over node names is shuffled with `seed`, so a spec is one fleet.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from numa_align.settings import Settings as PluginSettings
from numa_align.settings import SettingsError, read_settings
from numa_align.sysfs import HostTopology

from numalab.fleet.errors import FleetError
from numalab.fleet.nodes import host_topology
from numalab.model.errors import ValidationError
from numalab.model.kubelet_policy import KubeletPolicy, kubelet_policy
from numalab.model.kubelet_settings import KubeletSettings
from numalab.model.plugin_settings import plugin_settings
from numalab.model.topology import Topology


@dataclass(frozen=True)
class Shape:
    """A server shape: `numa` in the inventory form, kubelet `settings` over numa-lab's defaults
    (single-numa-node, scope pod, static CPU and Memory Managers, 500m+500m CPU reserved), numa-align's
    NUMA_* `plugin` settings (capacity: 100 devices per cell by default)."""

    description: str
    numa: Mapping[str, Any]
    settings: Mapping[str, Any] = field(default_factory=dict)
    plugin: Mapping[str, str] = field(default_factory=dict)


def _cells(count: int, cpus: int, memory: str, pages: int = 0) -> list[dict[str, Any]]:
    return [{"id": c, "cpus": f"{c * cpus}-{c * cpus + cpus - 1}", "memory": memory,
             **({"hugepages": {"2Mi": pages}} if pages else {})} for c in range(count)]


SNC_DISTANCES = [[10, 11, 21, 21], [11, 10, 21, 21], [21, 21, 10, 11], [21, 21, 11, 10]]
"""Two sockets split in two (sub-NUMA clustering): a cell's twin on its socket is near, the other socket far."""
FULL_PCPUS = {"cpu-manager-policy-options": {"full-pcpus-only": "true"}}

SHAPES: dict[str, Shape] = {
    "2cell-16": Shape("2 sockets x 8 cores, no SMT, 1 GiB of 2Mi pages a cell",
                      {"cells": _cells(2, 8, "16Gi", 512)}),
    "2cell-smt-32": Shape("2 sockets x 8 cores x 2 threads (the reserved CPU takes a whole core)",
                          {"threads_per_core": 2, "cells": _cells(2, 16, "32Gi", 1024)}),
    "2cell-smt-full-32": Shape("the SMT server under full-pcpus-only: the kubelet refuses odd CPU counts "
                               "(SMTAlignmentError), which no scheduler looks at",
                               {"threads_per_core": 2, "cells": _cells(2, 16, "32Gi", 1024)}, FULL_PCPUS),
    "2cell-reserved-32": Shape("2 sockets x 16 cores, a reserved CPU on each socket, scope container, one numa-align "
                               "device per CPU",
                               {"cells": _cells(2, 16, "32Gi")},
                               {"reserved-cpus": "0,16", "topology-manager-scope": "container"},
                               {"NUMA_CAPACITY": "cpus"}),
    "3cell-memonly-24": Shape("2 sockets x 12 cores and a memory-only cell (CXL), scope container",
                              {"cells": [*_cells(2, 12, "24Gi", 512), {"id": 2, "memory": "64Gi"}],
                               "distances": [[10, 21, 28], [21, 10, 28], [28, 28, 10]]},
                              {"topology-manager-scope": "container"}),
    "4cell-smt-64": Shape("2 sockets with sub-NUMA clustering: 4 cells x 8 cores x 2 threads, unequal distances, "
                          "4 CPUs reserved",
                          {"threads_per_core": 2, "cells": _cells(4, 16, "16Gi", 512), "distances": SNC_DISTANCES},
                          {"kube-reserved": {"cpu": "2", "memory": "1Gi"}}),
    "4cell-closest-64": Shape("the 4-cell SNC server under restricted + prefer-closest-numa-nodes, scope container "
                              "(the NUMA-aware scheduler's filter checks only single-numa-node)",
                              {"threads_per_core": 2, "cells": _cells(4, 16, "16Gi", 512),
                               "distances": SNC_DISTANCES},
                              {"topology-manager-policy": "restricted", "topology-manager-scope": "container",
                               "topology-manager-policy-options": {"prefer-closest-numa-nodes": "true"}}),
}

DEFAULT_FLEET: dict[str, Any] = {
    "nodes": 100,
    "seed": 1,
    "shapes": [{"shape": "2cell-16", "weight": 3}, {"shape": "2cell-smt-32", "weight": 3},
               {"shape": "2cell-reserved-32", "weight": 2}, {"shape": "3cell-memonly-24", "weight": 1},
               {"shape": "4cell-smt-64", "weight": 1}],
}
"""The bench's mix: single-numa-node shapes without full-pcpus-only, the rules NodeResourceTopologyMatch can
follow (its filter checks single-numa-node only, and no scheduler checks SMT alignment)."""
_TOP_KEYS = {"nodes", "seed", "shapes", "prefix"}
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")
_ENTRY_KEYS = {"shape", "weight", "count", "settings"}


@dataclass(frozen=True, eq=False)
class NodeShape:
    """A shape resolved: its topology, the kubelet policy numa-lab computes, numa-align's settings and the host
    as numa-align's sysfs reader would see it. Shared by every node of that shape and settings."""

    name: str
    topology: Topology
    policy: KubeletPolicy
    plugin: PluginSettings
    host: HostTopology


@dataclass(frozen=True)
class NodeDescription:
    """One node of the fleet: its name, its place in the fleet (its addresses derive from it) and its shape."""

    name: str
    index: int
    shape: NodeShape


@dataclass(frozen=True)
class ShapeEntry:
    """One entry of `shapes`: a resolved shape with its weight or its exact count."""

    shape: NodeShape
    weight: Fraction | None
    count: int | None


@dataclass(frozen=True)
class FleetSpec:
    """A checked spec: `expand` turns it into the fleet."""

    nodes: int
    entries: tuple[ShapeEntry, ...]
    seed: int = 0
    prefix: str = "fleet"


def resolve_shape(name: str, overrides: Mapping[str, Any] | None = None, where: str = "shape") -> NodeShape:
    """The shape `name` with kubelet settings `overrides`; FleetError naming `where` for an unknown name or a
    policy numa-lab refuses."""
    if name not in SHAPES:
        raise FleetError(f"{where}: unknown shape {name!r} (known: {', '.join(sorted(SHAPES))})")
    shape = SHAPES[name]
    try:
        topology = Topology.from_dict(shape.numa, where=f"shapes.{name}.numa")
        settings = KubeletSettings.from_dict({**shape.settings, **(overrides or {})})
        policy = kubelet_policy(topology, settings, cgroup_version=2)
        plugin = read_settings(plugin_settings(shape.plugin, policy.reserved_cpus), {}, serving=False)
    except (ValidationError, SettingsError) as exc:
        raise FleetError(f"{where} ({name}): {exc}") from None
    return NodeShape(name, topology, policy, plugin, host_topology(topology))


def _weight(raw: Any, where: str) -> Fraction:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw < float("inf"):
        raise FleetError(f"{where}: expected a number > 0, got {raw!r}")
    return Fraction(raw)


def _entry(raw: Any, where: str, cache: dict[tuple[str, str], NodeShape]) -> ShapeEntry:
    if not isinstance(raw, Mapping) or "shape" not in raw:
        raise FleetError(f"{where}: expected {{shape: NAME, weight: W}} or {{shape: NAME, count: N}}, got {raw!r}")
    unknown = sorted(set(map(str, raw)) - _ENTRY_KEYS)
    if unknown:
        raise FleetError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(_ENTRY_KEYS))})")
    if ("weight" in raw) == ("count" in raw):
        raise FleetError(f"{where}: give weight or count, not {'both' if 'weight' in raw else 'neither'}")
    overrides = raw.get("settings") or {}
    if not isinstance(overrides, Mapping):
        raise FleetError(f"{where}.settings: expected a mapping of kubelet settings, got {overrides!r}")
    key = (str(raw["shape"]), repr(sorted(overrides.items(), key=str)))
    if key not in cache:
        cache[key] = resolve_shape(str(raw["shape"]), overrides, f"{where}.shape")
    if "count" in raw:
        count = raw["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FleetError(f"{where}.count: expected a whole number >= 1, got {count!r}")
        return ShapeEntry(cache[key], None, count)
    return ShapeEntry(cache[key], _weight(raw["weight"], f"{where}.weight"), None)


def fleet_spec(data: Any, where: str = "fleet") -> FleetSpec:
    """A checked spec from its YAML form; FleetError naming the field for anything refused."""
    if not isinstance(data, Mapping):
        raise FleetError(f"{where}: expected a mapping with nodes and shapes, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise FleetError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    nodes = data.get("nodes")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise FleetError(f"{where}.nodes: expected a whole number >= 1, got {nodes!r}")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise FleetError(f"{where}.seed: expected a whole number, got {seed!r}")
    prefix = data.get("prefix", "fleet")
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise FleetError(f"{where}.prefix: expected lower-case letters, digits and '-' (a DNS label), got {prefix!r}")
    raw = data.get("shapes")
    if not isinstance(raw, list) or not raw:
        raise FleetError(f"{where}.shapes: expected a non-empty list of {{shape: NAME, weight: W}}")
    cache: dict[tuple[str, str], NodeShape] = {}
    entries = tuple(_entry(entry, f"{where}.shapes[{i}]", cache) for i, entry in enumerate(raw))
    counted = sum(entry.count or 0 for entry in entries)
    if counted > nodes:
        raise FleetError(f"{where}.nodes: {nodes} nodes, but the shapes' counts add up to {counted}")
    if counted < nodes and not any(entry.weight for entry in entries):
        raise FleetError(f"{where}.nodes: {nodes} nodes, but the shapes' counts add up to {counted} and no shape has "
                         "a weight to fill the rest")
    return FleetSpec(nodes, entries, seed, prefix)


def load_spec(path: Path) -> FleetSpec:
    """The spec in a YAML file; its errors name the file's fields (<path>.shapes[0].shape: ...)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FleetError(f"{path}: cannot be read as YAML: {' '.join(str(exc).split())}") from None
    return fleet_spec(data, where=str(path))


def shares(spec: FleetSpec) -> list[int]:
    """Nodes per entry: counts as given, weights by largest remainder (ties to the earlier entry)."""
    left = spec.nodes - sum(entry.count or 0 for entry in spec.entries)
    total = sum(entry.weight or 0 for entry in spec.entries)
    quotas = [left * entry.weight / total if entry.weight else Fraction(0) for entry in spec.entries]
    counts = [int(quota) if e.count is None else e.count for e, quota in zip(spec.entries, quotas, strict=True)]
    order = sorted((i for i, e in enumerate(spec.entries) if e.weight), key=lambda i: (-(quotas[i] % 1), i))
    for i in order[:spec.nodes - sum(counts)]:
        counts[i] += 1
    return counts


def expand(spec: FleetSpec) -> list[NodeDescription]:
    """One description per node, named <prefix>-00000 on; the same spec always gives the same fleet."""
    chosen = [entry.shape for entry, count in zip(spec.entries, shares(spec), strict=True) for _ in range(count)]
    random.Random(spec.seed).shuffle(chosen)
    width = max(5, len(str(spec.nodes - 1)))
    return [NodeDescription(f"{spec.prefix}-{i:0{width}d}", i, shape) for i, shape in enumerate(chosen)]
