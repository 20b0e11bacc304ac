"""The cluster test's reading of the e2e run's explain-vs-kubelet corpus: every pair agreed, at least 30 of them,
one row each; a disagreement or a short corpus fails, naming what it saw."""

from __future__ import annotations

import pytest

from tests.cluster.checks import assert_explain_agreement


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
