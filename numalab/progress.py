"""Progress lines for steps that take from seconds to half an hour, so a user never waits in silence.

One line when a step starts and one with its duration when it ends (or fails), on stderr (stdout stays
for results), flushed at once so they interleave with pyinfra's output line by line. `NUMALAB_QUIET=1`
silences the module-level `say`/`step` (benchmarks that print their own tables).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TextIO


class Progress:
    """Writes `[  12.3s] prefix: text` lines to a stream (stderr by default); seconds count from creation."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "numa-lab") -> None:
        self.stream = stream
        self.prefix = prefix
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"[{self.elapsed():7.1f}s] {self.prefix}: {text}\n")
        stream.flush()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A line when the step starts and one with its duration when it ends (or fails)."""
        self.note(f"{name} ...")
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.note(f"{name} failed after {time.monotonic() - started:.1f} s")
            raise
        self.note(f"{name} done in {time.monotonic() - started:.1f} s")


class Silent(Progress):
    """Progress that writes nothing (tests, `--quiet`)."""

    def note(self, text: str) -> None:
        pass


_DEFAULT: Progress | None = None


def _default() -> Progress:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Silent() if os.environ.get("NUMALAB_QUIET") else Progress()
    return _DEFAULT


def say(message: str) -> None:
    """One progress line on the process-wide progress stream."""
    _default().note(message)


def step(what: str) -> AbstractContextManager[None]:
    """`with step("building the image"):` on the process-wide progress stream."""
    return _default().step(what)
