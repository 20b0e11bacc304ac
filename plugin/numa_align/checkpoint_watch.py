"""Wake the NRT publisher when the kubelet rewrites its CPU or Memory Manager checkpoint.

The kubelet admits a pinned pod by allocating its CPUs and memory and writing them to
`<root-dir>/cpu_manager_state` and `memory_manager_state` (a temporary file renamed into place) before the
container starts. PodResources already answers with the allocation then, so a poll at that moment shows
it: an inotify watch on the kubelet's root directory turns the poll's period (2 s) into a few milliseconds.
The poll stays as the safety net, and is the only path while the directory cannot be watched (absent, or
inotify refused): said once in the log, tried again at every wait.

Under numa-lab's DaemonSet the pod does not see the kubelet's root directory (only device-plugins/ and
pod-resources/ below it are mounted; the root holds every pod's volumes, Secrets included, and a copy of
its mounts in a container keeps them busy), so there the poll alone keeps the object fresh.

One admission writes both files within milliseconds (and a direct write is a create then a close): events
are gathered for SETTLE seconds after the first, so a burst causes one poll, not one per file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from numa_align.kubelet_sources import CPU_STATE, MEMORY_STATE
from numa_align.watching import IN_CLOSE_WRITE, DirectoryWatch, DirEvent, WatchError

log = logging.getLogger(__name__)

SETTLE = 0.05
"""Seconds to wait for more checkpoint events after one, before polling."""
SETTLE_MOST = 0.5
"""Seconds of a continuous burst after which the poll runs anyway."""
CHECKPOINTS = (CPU_STATE, MEMORY_STATE)


def kubelet_dir(pod_resources_socket: Path) -> Path:
    """The kubelet's root directory (--root-dir): its checkpoints sit there, PodResources in pod-resources/."""
    return pod_resources_socket.parent.parent


class CheckpointWatch:
    """`wait(timeout)` returns when a checkpoint changed, `wake()` was called, or `timeout` passed. `changed_at`
    (clock time) is when the first change not yet published was seen: `polling()` and `polled()` frame each poll."""

    def __init__(self, directory: Path, *, clock: Callable[[], float] = time.monotonic, settle: float = SETTLE,
                 observe: Callable[[float], None] | None = None) -> None:
        self.directory = directory
        self.observe = observe
        """Given each write's latency: from the change seen (or the poll's start without an event) to written."""
        self.settle = settle
        self.changed_at: float | None = None
        self._clock = clock
        self._poked = threading.Event()
        self._watch: DirectoryWatch | None = None
        self._failed: str | None = None
        """Why the directory is not watched, once logged; None while watched (or not tried yet)."""

    @property
    def watching(self) -> bool:
        return self._watch is not None and self._watch.watching

    def wake(self) -> None:
        """Return from `wait` at once (a poke, or stop): safe from any thread, before `open` too."""
        self._poked.set()
        watch = self._watch
        if watch is not None:
            watch.wake()

    def open(self) -> None:
        """Start watching; the publisher polls on its interval alone while this fails."""
        try:
            if self._watch is None:
                self._watch = DirectoryWatch(self.directory, also=IN_CLOSE_WRITE)
            elif not self._watch.watching:
                self._watch.rewatch()
        except WatchError as exc:
            return self._unwatched(f"inotify: {exc.strerror}")
        if not self._watch.watching:
            return self._unwatched("no such directory")
        if self._failed is not None:
            log.info("watching %s for the kubelet's checkpoints again", self.directory)
        self._failed = None

    def wait(self, timeout: float) -> None:
        """Block until a checkpoint changed (then let the burst settle), `wake()`, or `timeout` seconds."""
        if not self.watching:
            self.open()
        watch = self._watch
        if watch is None or not watch.watching:
            self._poked.wait(timeout)
        deadline = time.monotonic() + timeout
        while watch is not None and watch.watching and not self._poked.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._changed(watch.wait(left)):  # other files of the directory: wait on
                self._seen()
                self._settle(watch)
                break
        self._poked.clear()

    def _settle(self, watch: DirectoryWatch) -> None:
        """Gather the rest of a burst: until the directory was quiet for `settle` seconds (SETTLE_MOST at most)."""
        deadline = time.monotonic() + SETTLE_MOST
        while not self._poked.is_set() and time.monotonic() < deadline and watch.watching and watch.wait(self.settle):
            pass

    def polling(self, writes: int) -> int:
        """A poll starts (after `writes` writes): a change it finds was seen now, unless an event saw it earlier."""
        if self.changed_at is None:
            self.changed_at = self._clock()
        return writes

    def polled(self, wrote: bool, waiting: bool) -> None:
        """A poll ended: `wrote` the object, or a change is `waiting` to be written (the write rate limit,
        API backoff: its latency counts from when it was first seen), or there was nothing to write."""
        if wrote and self.observe is not None and self.changed_at is not None:
            self.observe(self._clock() - self.changed_at)
        if wrote or not waiting:
            self.changed_at = None

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()

    def _seen(self) -> None:
        if self.changed_at is None:
            self.changed_at = self._clock()

    def _changed(self, events: list[DirEvent]) -> bool:
        """A checkpoint was written, or the directory must be looked at again (gone, or events lost)."""
        return any((event.name in CHECKPOINTS and event.created) or not event.name for event in events)

    def _unwatched(self, why: str) -> None:
        if self._failed is None:
            log.warning("cannot watch %s for the kubelet's checkpoints (%s): the NodeResourceTopology object "
                        "follows pod admissions at the next poll only", self.directory, why)
        self._failed = why
