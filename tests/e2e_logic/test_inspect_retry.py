"""e2e/inspect_retry.py: a PodResources timeout is asked once more, with the kubelet's journal kept; other
failures are not (run wc at 80a3fe5: worker-3's PodResources past its 10 s deadline after the API restart)."""

from __future__ import annotations

import pytest

from numalab.inspect import RemoteInspectError
from tests.e2e_logic.conftest import load_e2e_module

retry = load_e2e_module("inspect_retry")
TIMEOUT = ("worker-3: `numa-align inspect --format json` exited 1: numa-align inspect: PodResources API at "
           "/var/lib/kubelet/pod-resources/kubelet.sock: DEADLINE_EXCEEDED: Deadline Exceeded")


def asks(*outcomes):
    """An ask() giving each outcome in turn (an exception is raised), and the list of asks made."""
    made = []

    def ask():
        outcome = outcomes[len(made)]
        made.append(outcome)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return ask, made


def test_an_answer_at_once_is_the_report_with_no_retry() -> None:
    ask, made = asks({"pods": []})
    asked = retry.inspect_twice(ask, lambda: pytest.fail("no journal read"), sleep=lambda s: pytest.fail("slept"))
    assert asked == retry.Asked({"pods": []}) and len(made) == 1


def test_a_timeout_is_asked_again_after_a_pause_and_kept_with_the_journal() -> None:
    ask, made = asks(RemoteInspectError(TIMEOUT), {"pods": [1]})
    slept = []
    asked = retry.inspect_twice(ask, lambda: "kubelet[908]: something slow", sleep=slept.append)
    assert asked.report == {"pods": [1]} and asked.timed_out == TIMEOUT
    assert asked.journal == "kubelet[908]: something slow" and slept == [retry.ASK_AGAIN_AFTER] and len(made) == 2


def test_two_timeouts_fail_with_both_errors_and_the_journal() -> None:
    ask, _ = asks(RemoteInspectError(TIMEOUT), RemoteInspectError(TIMEOUT + " again"))
    with pytest.raises(AssertionError) as raised:
        retry.inspect_twice(ask, lambda: "x" * 5000 + "the end", sleep=lambda s: None)
    said = str(raised.value)
    assert said.startswith(TIMEOUT + " again (and 5 s before: " + TIMEOUT) and said.endswith("the end")
    assert len(said) < 2 * len(TIMEOUT) + retry.JOURNAL_CHARS + 200  # the journal's tail, not all of it


def test_another_failure_is_not_asked_again() -> None:
    ask, made = asks(RemoteInspectError("worker-3: `numa-align inspect` exited 127: not found"), {"pods": []})
    with pytest.raises(AssertionError, match="exited 127"):
        retry.inspect_twice(ask, lambda: pytest.fail("no journal read"), sleep=lambda s: pytest.fail("slept"))
    assert len(made) == 1
