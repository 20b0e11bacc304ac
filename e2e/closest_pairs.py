"""Case 8's pairs for a worker under restricted or best-effort with prefer-closest-numa-nodes: pods that need
more than one cell, so the kubelet must choose a set of cells, and the choice tells the option apart.

Pure. The rule `expect` follows is the kubelet's (k8s.io/kubernetes v1.36.3 pkg/kubelet/cm): cpumanager
policy_static.go generateCPUTopologyHints (masks over the cells with online CPUs whose available CPUs cover the
request; preferred iff as wide as the narrowest mask whose CPUs in total, reserved included, could),
topologymanager policy.go HintMerger (preferred first; among equal widths numa_info.go Closest, the smaller
CalculateAverageFor, with prefer-closest-numa-nodes, else Narrowest), policy_restricted.go (a best hint that is
not preferred is a TopologyAffinityError). Only CPU hints take part: the pairs are made only without the Static
Memory Manager and ask no device. `baseline` is the same rule without the option: the pair proves the option
only where the two differ.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kubelet_outcome import Outcome, observable

from numalab.explain.merging import average_distance
from numalab.explain.node_state import KubeletSettings

if TYPE_CHECKING:
    from explain_corpus import Pair, Shape, _Builder

PREFIX = "closest-"
OPTION = "prefer-closest-numa-nodes"
TAE = "TopologyAffinityError"
CHOICES = ("all", "closest")
NONE_RUN = (f"no worker runs restricted or best-effort with {OPTION} on 3 or more cells with free CPUs and unequal "
            "distances: no closest- pair to run")


def prefer_closest(kubelet_config: Mapping[str, object]) -> bool:
    """The option as the kubelet reads it (strconv.ParseBool)."""
    options = {str(k): str(v) for k, v in dict(kubelet_config.get("topologyManagerPolicyOptions") or {}).items()}
    return bool(KubeletSettings("", "", topology_options=options).topology_option(OPTION))


def applies(shape: Shape) -> bool:
    """restricted or best-effort with the option, static CPU Manager without the Static Memory Manager, 3+ cells
    with a free whole unit of CPUs, and cells with CPUs whose distances are known and not all the same."""
    if not (shape.policy in ("restricted", "best-effort") and shape.prefer_closest and shape.cpu_static
            and not shape.memory_static):
        return False
    if sum(c.cpus >= shape.unit for c in shape.cells) < 3:
        return False
    ids = [c.id for c in shape.cells if c.capacity > 0]
    costs = {c.id: dict(c.costs) for c in shape.cells}
    between = [costs[a].get(b) for a in ids for b in ids if a != b]
    return None not in between and len(set(between)) > 1


def cpu_outcome(shape: Shape, cpus: int, closest: bool) -> Outcome | None:
    """The kubelet's outcome for a pod whose only hints are its exclusive `cpus`; None where the rule is not
    modelled here (best-effort with no preferred hint: the CPU Manager then allocates outside the hint)."""
    with_cpus = [c for c in shape.cells if c.capacity > 0]
    costs = {c.id: dict(c.costs) for c in shape.cells}
    masks = [m for n in range(1, len(with_cpus) + 1) for m in itertools.combinations(with_cpus, n)]
    width = min((len(m) for m in masks if sum(c.capacity for c in m) >= cpus), default=len(with_cpus))
    preferred = [tuple(c.id for c in m) for m in masks if len(m) == width and sum(c.cpus for c in m) >= cpus]
    if not preferred:
        return Outcome("rejected", TAE) if shape.policy == "restricted" else None

    def rank(mask: tuple[int, ...]) -> tuple[float, int]:
        return (average_distance(mask, costs) if closest else 0.0, sum(1 << cell for cell in mask))

    return Outcome("admitted", cells={"cpu": list(min(preferred, key=rank))})


def _cells_needed(shape: Shape, count: int) -> int:
    """The fewest whole units of CPUs no `count - 1` cells hold in total (reserved CPUs included)."""
    capacities = sorted((c.capacity for c in shape.cells if c.capacity > 0), reverse=True)
    return (sum(capacities[:count - 1]) // shape.unit + 1) * shape.unit


def _width(outcome: Outcome | None) -> int:
    return len(outcome.cells.get("cpu", ())) if outcome and outcome.verdict == "admitted" else 0


def closest_pairs(b: _Builder, shape: Shape) -> list[Pair]:
    """closest-pair (the closest two cells), closest-pair-after-filler (a filler takes one of them: the next
    closest pair), closest-three-cells; each only where the kubelet admits it on that many cells."""
    if not applies(shape):
        return []
    pairs: list[Pair] = []
    two = _cells_needed(shape, 2)
    first = cpu_outcome(shape, two, True)
    if two <= shape.node_cpus and _width(first) == 2:
        pairs.append(_pair(b, "closest-pair", shape, two))
        options = []
        for cell in first.cells["cpu"]:
            take = next(c for c in shape.cells if c.id == cell).cpus // shape.unit * shape.unit
            after = shape.minus(cell, take, 0)
            options.append((cpu_outcome(after, two, True) == cpu_outcome(after, two, False), cell, take, after))
        _, cell, take, after = min(options, key=lambda option: option[:2])  # one that tells the option apart
        if 0 < take and take + two <= shape.node_cpus and cpu_outcome(after, two, True) is not None:
            filler = b.filler("closest-pair-after-filler", 0, cell, take)
            pairs.append(_pair(b, "closest-pair-after-filler", after, two, (filler,)))
    three = _cells_needed(shape, 3)
    if three <= shape.node_cpus and _width(cpu_outcome(shape, three, True)) == 3:
        pairs.append(_pair(b, "closest-three-cells", shape, three))
    if shape.scope == "container":
        pairs += _container_pairs(b, shape, two)
    return pairs


def _container_pairs(b: _Builder, shape: Shape, two: int) -> list[Pair]:
    """closest-containers, under scope container (topologymanager scope_container.go: each container's hints
    merged and its CPUs allocated before the next one's): two containers of one unit each take the best
    one-cell mask in turn, where under scope pod their sum would take the closest pair of cells."""
    u = shape.unit
    first = cpu_outcome(shape, u, True)
    if _width(first) != 1 or 2 * u != two or two > shape.node_cpus:
        return []
    (cell,) = first.cells["cpu"]
    second = cpu_outcome(shape.minus(cell, u, 0), u, True)
    if _width(second) != 1:
        return []
    expect = Outcome("admitted", cells={"cpu": sorted({cell, *second.cells["cpu"]})})
    pair = b.pair("closest-containers", [b.guaranteed("a", u), b.guaranteed("b", u)], expect)
    return [replace(pair, expect=expect, baseline=cpu_outcome(shape, two, True),
                    baseline_is="under topology-manager-scope pod")]


def _pair(b: _Builder, name: str, shape: Shape, cpus: int, fillers: tuple[dict, ...] = ()) -> Pair:
    """The pair with its expectation and baseline, written whatever `rules` says (it is about single-numa-node)."""
    expect = cpu_outcome(shape, cpus, True)
    pair = b.pair(name, [b.guaranteed("app", cpus)], expect, fillers=fillers)
    return replace(pair, expect=expect, baseline=cpu_outcome(shape, cpus, False))


def selected(pairs: Sequence[Pair], which: str) -> list[Pair]:
    """--explain-pairs: every pair, or only the closest- ones."""
    return list(pairs) if which == "all" else [p for p in pairs if p.name.startswith(PREFIX)]


def none_to_run(plans: Iterable[Sequence[Pair]], which: str) -> str | None:
    """Why the run must fail when only closest- pairs were asked and no worker has one; else None."""
    return NONE_RUN if which == "closest" and not any(plans) else None


def _cells(outcome: Outcome) -> dict[str, list[int]]:
    return {k: sorted(v) for k, v in outcome.cells.items() if observable(k)}


def _said(outcome: Outcome) -> str:
    if outcome.verdict != "admitted":
        return f"{outcome.verdict} {outcome.reason}".strip()
    cells = _cells(outcome)
    return ", ".join(f"{k} {','.join(map(str, v))}" for k, v in sorted(cells.items())) or "no exclusive cells"


def against_baseline(expect: Outcome | None, baseline: Outcome, real: Outcome,
                     baseline_is: str = f"without {OPTION}") -> tuple[bool, str]:
    """(ok, what to add to the row's detail): not ok when the kubelet gave the cells it gives `baseline_is`
    (without the option, or under the other scope) while the setting should give others (it had no effect; the
    pair proves nothing)."""
    note = f"; {baseline_is}: {_said(baseline)}"
    differs = expect is not None and (expect.verdict, _cells(expect)) != (baseline.verdict, _cells(baseline))
    same = real.verdict == baseline.verdict == "admitted" and _cells(real) == _cells(baseline)
    if differs and same:
        return False, (f"; the kubelet gave the cells it gives {baseline_is}, not the expected "
                       f"{_said(expect)}: the setting had no effect{note}")
    return True, note
