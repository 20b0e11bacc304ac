"""When to try again something that failed: exponential backoff, with jitter where many nodes retry at once.

The plugin's main loop retries a kubelet registration and a socket bind without jitter (one process, one
kubelet). The NRT publisher retries the API server, which every node's numa-align loses at the same moment
during an outage: with jitter their retries spread out instead of arriving together when it comes back.
The jitter is "equal jitter": half the doubled delay fixed, the other half random, so a node never retries
at once (full jitter can draw ~0) and the nodes still spread over half the delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """`first` seconds after the first failure, doubling up to `most`; `failures` counts the failures since
    the last success. With `jitter` (a random() in [0, 1), e.g. random.random) each wait is drawn from
    [delay/2, delay); `clock` is time.monotonic unless a test gives its own."""

    first: float
    most: float
    due: float = 0.0
    """clock() of the next attempt; 0 means now."""
    delay: float = 0.0
    """The latest wait (jittered when jitter is on)."""
    failures: int = 0
    jitter: Callable[[], float] | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def failed(self) -> float:
        """Note a failure; return the seconds until the next attempt."""
        self.failures += 1
        base = min(self.first * 2 ** min(self.failures - 1, 62), self.most)
        self.delay = base if self.jitter is None else base / 2 + self.jitter() * base / 2
        self.due = self.clock() + self.delay
        return self.delay

    def reset(self) -> None:
        """Succeeded, or worth trying at once: the next attempt is due now, at the first delay."""
        self.due, self.delay, self.failures = 0.0, 0.0, 0

    def is_due(self) -> bool:
        return self.clock() >= self.due

    def remaining(self) -> float:
        """Seconds until the next attempt (0 when due)."""
        return max(0.0, self.due - self.clock())
