"""The bench's creation pool: an interrupted burst drops the creations not started (numalab.fleet.filling.creators).
A plain ThreadPoolExecutor's exit created every queued object first: a 5,000-node run stopped with SIGTERM in its
burst kept its control plane busy creating pods for a quarter of an hour and starved the next run of CPU."""

from __future__ import annotations

import threading
import time

import pytest

from numalab.fleet.filling import creators


def test_an_interrupt_drops_the_creations_not_started() -> None:
    made, lock = [], threading.Lock()

    def create(n: int) -> None:
        time.sleep(0.01)
        with lock:
            made.append(n)

    with pytest.raises(KeyboardInterrupt), creators(4) as pool:
        futures = [pool.submit(create, n) for n in range(2000)]
        raise KeyboardInterrupt
    assert len(made) <= 40  # the ones under way finish; the rest (nearly 2,000, 5 s of work) never start
    assert sum(f.cancelled() for f in futures) >= 1900


def test_without_an_interrupt_every_creation_is_made() -> None:
    made = []
    with creators(4) as pool:
        for n in range(200):
            pool.submit(made.append, n)
    assert sorted(made) == list(range(200))
