"""How long each step of the cluster test took: the CI budget is spent there, so every run prints it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

STEPS: list[tuple[str, float]] = []


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time one step of the cluster test; a step that raised is listed too, marked."""
    started = time.monotonic()
    failed = True
    try:
        yield
        failed = False
    finally:
        STEPS.append((name + (" (failed)" if failed else ""), time.monotonic() - started))
