"""A lock that serializes work across processes and across pyinfra's gevent greenlets.

fcntl.flock blocks the whole process, which would deadlock greenlets of one pyinfra run waiting on
each other; so the lock is taken non-blocking and retried with time.sleep (cooperative under gevent).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_SECONDS = 0.5


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)
