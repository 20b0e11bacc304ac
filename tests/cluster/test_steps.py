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
