"""The Topology Manager's merge of hint providers' hints, as data and small functions.

Mirrors k8s.io/kubernetes v1.36.3 pkg/kubelet/cm/topologymanager (policy.go: filterProvidersHints,
mergePermutation, HintMerger.compare/Merge; policy_single_numa_node.go: filterSingleNumaHints; numa_info.go:
Closest/Narrowest, CalculateAverageFor). A mask is a frozenset of NUMA ids; None is "any cell" (no preference).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
Mask = frozenset[int]


@dataclass(frozen=True)
class Hint:
    """One TopologyHint: the cells (None: no preference) and whether the provider prefers it."""

    cells: Mask | None
    preferred: bool

    def as_dict(self) -> dict[str, object]:
        return {"cells": None if self.cells is None else sorted(self.cells), "preferred": self.preferred}


def mask_value(mask: Mask) -> int:
    """The bitmask as the kubelet's uint64: the lower value "has more lower-numbered bits" (IsLessThan)."""
    return sum(1 << cell for cell in mask)


def narrower(a: Mask, b: Mask) -> bool:
    """bitmask.IsNarrowerThan: fewer cells, or as many with lower-numbered ones."""
    return mask_value(a) < mask_value(b) if len(a) == len(b) else len(a) < len(b)


def average_distance(mask: Mask, distances: Mapping[int, Mapping[int, int]]) -> float:
    """NUMADistances.CalculateAverageFor: the mean over every ordered pair of the mask's cells, itself included."""
    if not mask:
        return 0.0
    return sum(distances[a][b] for a in mask for b in mask) / (len(mask) ** 2)


ProviderHints = Mapping[str, Sequence[Hint] | None] | None
"""One provider's answer: None or {} (no preference at all), else per resource None (no preference for it),
[] (no possible affinity) or its hints."""


def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[Hint]]:
    """filterProvidersHints: one list per resource; "no preference" becomes (any, preferred), "nothing fits"
    becomes (any, not preferred)."""
    lists: list[list[Hint]] = []
    for hints in providers:
        if not hints:
            lists.append([Hint(None, True)])
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                lists.append([Hint(None, True)])
            elif not resource_hints:
                lists.append([Hint(None, False)])
            else:
                lists.append(list(resource_hints))
    return lists


def filter_single_numa(lists: Sequence[Sequence[Hint]]) -> list[list[Hint]]:
    """filterSingleNumaHints: keep preferred hints that are "any" or exactly one cell."""
    return [[h for h in hints if h.preferred and (h.cells is None or len(h.cells) == 1)] for hints in lists]


@dataclass(frozen=True)
class Merger:
    """HintMerger for one admission: the node's cells, distances, and whether closest masks win ties of width."""

    cells: Mask
    distances: Mapping[int, Mapping[int, int]]
    prefer_closest: bool

    def better_mask(self, current: Hint, candidate: Hint) -> Hint:
        """CompareNUMAAffinityMasks: Closest (prefer-closest-numa-nodes) or Narrowest."""
        assert current.cells is not None and candidate.cells is not None
        if current.cells == candidate.cells:
            return current
        a, b = current.cells, candidate.cells
        if self.prefer_closest and len(a) == len(b):
            da, db = average_distance(a, self.distances), average_distance(b, self.distances)
            best = (a if mask_value(a) < mask_value(b) else b) if da == db else (a if da < db else b)
        else:
            best = a if narrower(a, b) else b
        return current if best == a else candidate

    def compare(self, current: Hint | None, candidate: Hint, best_count: int) -> Hint | None:
        """HintMerger.compare, its cases in the kubelet's order."""
        if not candidate.cells:
            return current
        if current is None:
            return candidate
        if current.preferred != candidate.preferred:
            return candidate if candidate.preferred else current
        if current.preferred:
            return self.better_mask(current, candidate)
        cur, cand = len(current.cells or ()), len(candidate.cells)
        if cur > best_count:
            return self.better_mask(current, candidate)
        if cur == best_count:
            return self.better_mask(current, candidate) if cand == best_count else current
        if cand > best_count:
            return current
        if cand == best_count or cand > cur:
            return candidate
        if cand < cur:
            return current
        return self.better_mask(current, candidate)

    def merge(self, lists: Sequence[Sequence[Hint]]) -> Hint:
        """Every permutation of one hint per resource, ANDed; the best by compare(); (all cells, not preferred)
        when none has a cell."""
        best_count = 0
        for hints in lists:
            masks = [h.cells for h in hints if h.cells is not None]
            if masks:
                narrowest = masks[0]
                for mask in masks[1:]:
                    narrowest = mask if narrower(mask, narrowest) else narrowest
                best_count = max(best_count, len(narrowest))
        best: Hint | None = None
        for permutation in itertools.product(*lists):
            best = self.compare(best, self._merge_permutation(permutation), best_count)
        return best if best is not None else Hint(self.cells, False)

    def _merge_permutation(self, permutation: Sequence[Hint]) -> Hint:
        masks = [h.cells for h in permutation if h.cells is not None]
        preferred = all(h.preferred for h in permutation) and all(m == masks[0] for m in masks)
        merged = self.cells
        for mask in masks:
            merged = merged & mask
        return Hint(frozenset(merged), preferred)


def merge(policy: str, providers: Sequence[ProviderHints], merger: Merger) -> tuple[Hint, bool]:
    """Policy.Merge: (best hint, admit). none admits with no hint; best-effort always admits; restricted and
    single-numa-node admit a preferred hint only; single-numa-node turns "all cells" into "any"."""
    if policy == "none":
        return Hint(None, True), True
    lists = filter_providers_hints(providers)
    if policy == "single-numa-node":
        lists = filter_single_numa(lists)
        closest = Merger(merger.cells, merger.distances, False)  # the option is ignored under single-numa-node
        best = closest.merge(lists)
        if best.cells == merger.cells:
            best = Hint(None, best.preferred)
        return best, best.preferred
    best = merger.merge(lists)
    return best, policy == "best-effort" or best.preferred
