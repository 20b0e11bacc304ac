"""One percentile rule for the bench and the cluster test: nearest rank, never an interpolation or a mean."""

from __future__ import annotations

import pytest

from numalab.percentiles import percentile, summary


def test_nearest_rank_of_twenty_samples() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # order does not matter
    assert summary(values) == (10.0, 19.0, 20.0)  # p50 the 10th smallest, p95 the 19th, not the max
    assert percentile(values, 99) == 20.0 and percentile(values, 5) == 1.0


def test_one_sample_is_every_percentile() -> None:
    assert summary([0.3]) == (0.3, 0.3, 0.3)


@pytest.mark.parametrize(("samples", "p"), [([], 50), ([1.0], 0), ([1.0], 101)])
def test_no_samples_or_a_percentile_outside_0_to_100_is_refused(samples: list[float], p: float) -> None:
    with pytest.raises(ValueError):
        percentile(samples, p)
