"""The cluster test's reading of the e2e run's explain-vs-kubelet corpus: every pair agreed, at least 30 of them,
one row each; a disagreement or a short corpus fails, naming what it saw."""

from __future__ import annotations

import pytest

from tests.cluster.checks import assert_closest_pairs, assert_explain_agreement


def table(results: list[str], line: str | None = None) -> str:
    rows = [f"worker-{i % 2 * 2 + 1}  *  explain:pair-{i}  {r}  -  -  predicted admitted cpu 1, kubelet admitted cpu 1"
            for i, r in enumerate(results)]
    said = line if line is not None else f"explain vs kubelet: {results.count('pass')}/{len(results)} pairs agree"
    return "\n".join(["WORKER  NUMA  CASE  RESULT  CPUS  MEMS  DETAIL", *rows, said])


def test_every_pair_agreeing_over_thirty_is_the_summary_line() -> None:
    assert assert_explain_agreement(table(["pass"] * 32)) == "explain vs kubelet: 32/32 pairs agree"


@pytest.mark.parametrize("text", [
    table(["pass"] * 31 + ["FAIL"]),  # a pair disagreed
    table(["pass"] * 29),  # fewer pairs than the issue asks
    table(["pass"] * 32, "explain vs kubelet: 33/33 pairs agree"),  # a row missing
    table(["pass"] * 32, ""),  # no line at all: the case did not run
])
def test_a_disagreement_a_short_corpus_or_no_line_fails(text: str) -> None:
    with pytest.raises(AssertionError):
        assert_explain_agreement(text)


def closest(took: str = "2,3", lowest: str = "1,2", result: str = "pass", split: str = "1,2") -> str:
    lines = [f"worker-1  *  explain:closest-pair  {result}  -  -  predicted admitted cpu 2,3, kubelet admitted cpu "
             f"{took}; without prefer-closest-numa-nodes: cpu {lowest}",
             "worker-1  *  explain:closest-three-cells  pass  -  -  predicted admitted cpu 1,2,3, kubelet admitted "
             "cpu 1,2,3; without prefer-closest-numa-nodes: cpu 1,2,3",
             f"worker-1  *  explain:closest-containers  pass  -  -  predicted admitted cpu 1,2, kubelet admitted cpu "
             f"{split}; under topology-manager-scope pod: cpu 2,3"]
    return "\n".join(["WORKER  NUMA  CASE  RESULT  CPUS  MEMS  DETAIL", *lines, "explain vs kubelet: 3/3 pairs agree"])


def test_closest_pairs_agreeing_with_both_settings_in_effect_are_a_summary_line() -> None:
    line = assert_closest_pairs(closest(), "worker-1")
    assert "3/3 pairs agree" in line and "closest-pair got cells 2,3" in line
    assert "closest-containers got cells 1,2" in line


@pytest.mark.parametrize("text", [
    closest(result="FAIL"),  # explain and the kubelet disagreed
    closest(took="1,2"),  # the kubelet took the lowest pair: prefer-closest had no effect, the pair shows nothing
    closest(split="2,3"),  # the containers took the pod's cells: scope container had no effect
    "\n".join(line for line in closest().splitlines() if "closest-containers" not in line),  # a pair missing
    closest().replace("worker-1", "worker-3"),  # not on the 4-cell worker
])
def test_closest_pairs_fail_on_a_disagreement_no_effect_or_a_missing_pair(text: str) -> None:
    with pytest.raises(AssertionError):
        assert_closest_pairs(text, "worker-1")
