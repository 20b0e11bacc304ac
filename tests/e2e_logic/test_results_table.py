"""The final worker x NUMA node x case table of the e2e suite."""

from __future__ import annotations

from tests.e2e_logic.conftest import load_e2e_module

results_module = load_e2e_module("results")


def test_table_is_sorted_and_aligned_with_cpus_and_mems_seen():
    results = results_module.Results()
    results.add("w2", 0, "pinned", True, "1", "0")
    results.add("w1", 1, "pinned", False, "0-1", "0-1", "cpus 0-1 are not all on node 1")
    results.add("w1", results_module.ALL_NODES, "burstable", True, "0-3", "0-1")
    assert results.table().splitlines() == [
        "WORKER  NUMA  CASE       RESULT  CPUS  MEMS  DETAIL",
        "w1      *     burstable  pass    0-3   0-1",
        "w1      1     pinned     FAIL    0-1   0-1   cpus 0-1 are not all on node 1",
        "w2      0     pinned     pass    1     0",
    ]


def test_failures_of_a_case_include_its_sub_cases():
    results = results_module.Results()
    results.add("w", 0, "multi:app", False, detail="NUMA_NODE is unset, expected 0")
    results.add("w", 0, "multi:sidecar", True)
    results.add("w", 0, "multiple", False)
    assert [row.case for row in results.failures("multi")] == ["multi:app"]
    assert results_module.describe_failures(results.failures("multi")) == (
        "w numa 0 multi:app: NUMA_NODE is unset, expected 0")


def test_a_case_that_does_not_apply_shows_as_n_a_and_is_no_failure() -> None:
    results = results_module.Results()
    results.add("w1", 0, "multi", None, detail="node 0 has 1 CPU(s) outside reserved-cpus; the pod needs 2")
    results.add("w1", 1, "multi:app", True, "2", "1")
    assert results.failures("multi") == []
    assert "n/a" in results.table() and "pass" in results.table()
