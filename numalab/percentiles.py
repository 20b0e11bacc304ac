"""Nearest-rank percentiles: the one rule behind every p50/p95/p99 numa-lab prints (bench/ and the cluster
test's summary), so a figure from the bench and one from the lab are read the same way.

The p-th percentile of n samples is the smallest sample with at least p% of the samples at or below it:
sorted(samples)[ceil(p/100 * n) - 1]; p50 of an even count is therefore the lower middle sample, not a mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(samples: Iterable[float], p: float) -> float:
    """The nearest-rank p-th percentile (0 < p <= 100) of a non-empty set of samples."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("percentile of no samples")
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p}: expected 0 < p <= 100")
    return ordered[max(0, math.ceil(p * len(ordered) / 100) - 1)]


def summary(samples: Iterable[float]) -> tuple[float, float, float]:
    """(p50, p95, max)."""
    ordered = sorted(samples)
    return percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 100)
