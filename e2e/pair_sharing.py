"""Case 8's pairs spread over the workers: a pair whose point is the pod's kind, not the worker's shape, runs on
one worker only.

Why: each worker runs its pairs one after another and the workers run side by side, so the case lasts as long
as the longest worker's sequence (about 12 s a pair under emulation). A Burstable or BestEffort pod, a pod over
the node's CPUs, a fractional Guaranteed pod, a shared container beside a pinned one and a Burstable pod with a
device are judged by rules that do not look at cells, CPUs per core or the Memory Manager; run on both workers
they said the same twice. Every shape-dependent pair still runs on each worker that has it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explain_corpus import Pair

SHARED = ("burstable", "besteffort", "burstable-over-node", "fractional-guaranteed", "multi-container-shared",
          "burstable-device")
"""Pairs judged the same on every worker: each runs on the one whose sequence is shortest when it is placed."""


def share(plans: Sequence[Sequence[Pair]]) -> list[list[Pair]]:
    """Each worker's pairs (in the order given) with each SHARED pair kept on one worker only: placed one name at a
    time on the worker, among those that have it, with the fewest pairs so far (the first on a tie)."""
    counts = [sum(p.name not in SHARED for p in pairs) for pairs in plans]
    keep: list[set[str]] = [set() for _ in plans]
    for name in SHARED:
        having = [i for i, pairs in enumerate(plans) if any(p.name == name for p in pairs)]
        if having:
            chosen = min(having, key=lambda i: (counts[i], i))
            keep[chosen].add(name)
            counts[chosen] += 1
    return [[p for p in pairs if p.name not in SHARED or p.name in keep[i]] for i, pairs in enumerate(plans)]
