"""The cluster test's summary keeps what a run must show whatever its outcome: an API server outage the e2e
cases waited out is listed, never hidden behind a green run."""

from __future__ import annotations

from tests.cluster import steps


def test_an_outage_line_of_the_e2e_output_is_kept_for_the_summary(monkeypatch) -> None:
    monkeypatch.setattr(steps, "NOTES", [])
    output = ("e2e/test_6_whole_cores.py .\n"
              "e2e: the API server refused or deferred 7 request(s) between 09:38:01 and 09:40:12 (131s); "
              "the cases waited\n"
              "numa-lab e2e: worker x NUMA node x case\n")
    steps.note_outages(output)
    assert steps.NOTES == ["e2e: the API server refused or deferred 7 request(s) between 09:38:01 and 09:40:12 "
                           "(131s); the cases waited"]


def test_a_run_without_outage_adds_nothing(monkeypatch) -> None:
    monkeypatch.setattr(steps, "NOTES", [])
    steps.note_outages("e2e/test_1_pinned.py ..\n4 passed in 80.0s\n")
    assert steps.NOTES == []


def test_a_steps_line_comes_before_what_was_noted_during_it(monkeypatch) -> None:
    monkeypatch.setattr(steps, "STEPS", [])
    with steps.step("first deploy"):
        steps.note_deploy("first", [("connect (lab up)", 80.0), ("plan (facts)", 120.0)], [("base | Wait", 9.0)])
    assert [name for name, _ in steps.STEPS] == ["first deploy", "  first: connect (lab up)", "  first: plan (facts)",
                                                 "    first op: base | Wait"]


def test_a_step_inside_another_is_listed_under_it_and_counted_once(monkeypatch) -> None:
    monkeypatch.setattr(steps, "STEPS", [])
    with steps.step("worker-1 cases"):
        with steps.step("audit"):
            pass
        try:
            with steps.step("fault: stuck"):
                raise RuntimeError
        except RuntimeError:
            pass
    with steps.step("destroy"):
        pass
    assert [name for name, _ in steps.STEPS] == ["worker-1 cases", "  audit", "  fault: stuck (failed)", "destroy"]


def test_a_failed_runs_excerpt_keeps_its_fail_rows_cut_from_the_tail() -> None:
    from tests.cluster.steps import failure_excerpt

    table = "\n".join(["WORKER  NUMA  CASE  RESULT  CPUS  MEMS  DETAIL",
                       "*  *  numa-scheduler:default-scheduler  pass  -  -  1 running, 2 rejected",
                       "*  *  numa-scheduler:numa-aware  FAIL  -  -  0 running, expected 1"]
                      + [f"worker-1  0  case-{i}  pass  1  0" for i in range(400)])
    excerpt = failure_excerpt(table, limit=200)
    assert excerpt.startswith("FAIL and whole-cluster rows:\n*  *  numa-scheduler:default-scheduler  pass")
    assert "*  *  numa-scheduler:numa-aware  FAIL" in excerpt  # the rows the tail alone lost
    assert excerpt.endswith(table[-200:]) and "numa-aware" not in table[-200:]
    assert failure_excerpt("all passed", 200) == "all passed"


def test_a_failed_runs_excerpt_names_pytests_failures_first_even_without_a_fail_row() -> None:
    from tests.cluster.steps import failure_excerpt

    output = "\n".join(["test_7_services_dns.py F", "=== FAILURES ===", "E   TimeoutError: no answer"]
                       + [f"worker-1  0  case-{i}  pass  1  0" for i in range(400)]
                       + ["=== short test summary info ===",
                          "FAILED test_7_services_dns.py::test_dns - TimeoutError: no answer",
                          "ERROR test_5_kubelet_restart.py::test_restart - teardown: namespace left",
                          "=== 1 failed, 40 passed, 1 error in 600s ==="])
    excerpt = failure_excerpt(output, limit=100)
    assert excerpt.startswith("pytest's failures:\nFAILED test_7_services_dns.py::test_dns - TimeoutError")
    assert "\nERROR test_5_kubelet_restart.py::test_restart - teardown" in excerpt.split("...")[0]
    assert "FAIL and whole-cluster rows" not in excerpt
