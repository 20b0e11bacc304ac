"""`numa-align inspect` on a worker, asked once more when the kubelet's PodResources API did not answer in time.

Run wc at 80a3fe5: just after the suite's API server restart, worker-3's kubelet left PodResources unanswered past
numa-align's 10 s deadline, failing both of its rows; not explained. A second ask ASK_AGAIN_AFTER seconds later
tells a moment from a hang. Either way the table says so, with the kubelet's journal of the minute before, so the
next time it happens is the one that explains it. Any other failure is not asked again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from numalab.inspect import RemoteInspectError

ASK_AGAIN_AFTER = 5.0
TIMED_OUT = "DEADLINE_EXCEEDED"
JOURNAL_COMMAND = "journalctl -u kubelet --since=-60s --no-pager -o short-monotonic | tail -n 20"
JOURNAL_CHARS = 3000


@dataclass(frozen=True)
class Asked:
    report: dict[str, Any]
    timed_out: str | None = None
    """The first ask's error when it timed out and the second answered."""
    journal: str = ""


def inspect_twice(ask: Callable[[], dict[str, Any]], journal: Callable[[], str],
                  pause: float = ASK_AGAIN_AFTER, sleep: Callable[[float], None] = time.sleep) -> Asked:
    """`ask()` (remote_inspect), and once more after `pause` when it timed out; AssertionError with both errors and
    `journal()` (the kubelet's, read right after the first timeout) when the second fails too."""
    try:
        return Asked(ask())
    except RemoteInspectError as exc:
        if TIMED_OUT not in str(exc):
            raise AssertionError(str(exc)) from None
        first = str(exc)
    seen = journal()[-JOURNAL_CHARS:]
    sleep(pause)
    try:
        return Asked(ask(), first, seen)
    except RemoteInspectError as exc:
        raise AssertionError(f"{exc} (and {pause:.0f} s before: {first}); the kubelet's journal of the minute "
                             f"before the first: {seen}") from None
