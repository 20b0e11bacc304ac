"""Watch the kubelet's socket directory with inotify (through ctypes: no dependency).

A restarted kubelet deletes every socket in the directory and creates kubelet.sock again; it never
redials a plugin. inotify tells the plugin at once, so it re-registers well within the kubelet's
patience, where a poll would add its period to every restart.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_WATCHED = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


class WatchError(OSError):
    """inotify is unavailable or the directory cannot be watched."""


@dataclass(frozen=True)
class DirEvent:
    """A name that appeared (`created`) or vanished in the directory. name is "" when the directory
    itself went away or the kernel dropped events (overflow): then the caller must look again."""

    name: str
    created: bool

    def __str__(self) -> str:
        return f"{'+' if self.created else '-'}{self.name or '(look again)'}"


class DirectoryWatch:
    """inotify watch on one directory; `wait(timeout)` returns the events so far, `wake()` interrupts it.
    `also`: more inotify events to report as a name that appeared (IN_CLOSE_WRITE: a file written in place)."""

    def __init__(self, path: Path, also: int = 0) -> None:
        self.path = path
        self._mask = _WATCHED | also
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._add_watch = libc.inotify_add_watch
        self._add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise WatchError(ctypes.get_errno(), f"inotify_init1: {os.strerror(ctypes.get_errno())}")
        self._fd = fd
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.RLock()  # re-entrant: wake() may run in a signal handler during close()
        self._closed = False
        self._wd: int | None = None
        self.rewatch()

    def rewatch(self) -> bool:
        """(Re)start watching the directory; False if it does not exist (yet)."""
        wd = self._add_watch(self._fd, os.fsencode(self.path), self._mask)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOENT:
                self._wd = None
                return False
            raise WatchError(err, f"inotify_add_watch {self.path}: {os.strerror(err)}")
        self._wd = wd
        return True

    @property
    def watching(self) -> bool:
        return self._wd is not None

    def wait(self, timeout: float | None) -> list[DirEvent]:
        """Block until events arrive, wake() is called or timeout seconds pass."""
        ready, _, _ = select.select([self._fd, self._wake_r], [], [], timeout)
        if self._wake_r in ready:
            while _drain(self._wake_r):
                pass
        return self._read() if self._fd in ready else []

    def wake(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                os.write(self._wake_w, b"!")
            except BlockingIOError:
                pass  # the pipe is full: a wake-up is already pending

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._fd, self._wake_r, self._wake_w):
                os.close(fd)

    def _read(self) -> list[DirEvent]:
        events: list[DirEvent] = []
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                name = data[offset : offset + length].rstrip(b"\0").decode(errors="replace")
                offset += length
                if mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                    if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                        self._wd = None
                    events.append(DirEvent("", False))
                elif mask & (IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE):
                    events.append(DirEvent(name, True))
                elif mask & (IN_DELETE | IN_MOVED_FROM):
                    events.append(DirEvent(name, False))


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False
