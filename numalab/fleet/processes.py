"""Host processes of the fleet control plane: started in their own process groups, waited for, stopped.

Each process has its own session (so its process group is its pid, and a Ctrl-C on the terminal reaches
only Python, which then stops them in order), and its own log file, where stdout and stderr both go.
Readiness is an HTTP(S) 200 from its health path; a process that exits or stays unready past the timeout
is named with the last lines of its log. Stopping sends SIGTERM to every group at once, waits, and kills
what is left with SIGKILL, so nothing outlives the control plane, grandchildren included.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from numalab.fleet.errors import FleetError

STOP_GRACE_SECONDS = 5.0
POLL_SECONDS = 0.2
TAIL_LINES = 3
TAIL_CHARS = 300


@dataclass
class Process:
    """One started program; `popen` is its handle (its pid is its process group)."""

    name: str
    argv: Sequence[str]
    log: Path
    popen: subprocess.Popen[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        """Still running? Asked without reaping it, so stop_all can still signal its group safely."""
        return self.popen.returncode is None and not _exited(self)


def start(name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> Process:
    """Start argv in a new session with its output appended to `log`; FleetError if it cannot be run."""
    with log.open("ab") as stream:
        stream.write(f"# {' '.join(argv)}\n".encode())
        stream.flush()
        try:
            popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=stream, stderr=subprocess.STDOUT,
                                     env=None if env is None else dict(env), cwd=cwd, start_new_session=True)
        except OSError as exc:
            raise FleetError(f"cannot start {name} ({argv[0]}): {exc.strerror or exc}") from None
    return Process(name, list(argv), log, popen)


def log_tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The last non-empty lines of `log` joined by ' | ' (each cut to TAIL_CHARS), for a one-line message."""
    try:
        with log.open("rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - 64 * 1024))
            text = stream.read().decode(errors="replace")
    except OSError as exc:
        return f"(no log: {exc.strerror})"
    kept = [line.strip()[:TAIL_CHARS] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty log)"


def get(url: str, context: ssl.SSLContext | None, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET url (https with `context`); the status and body, any HTTP error status included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context if url.startswith("https") else None) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_ready(process: Process, url: str, context: ssl.SSLContext | None, timeout: float) -> float:
    """Poll url until it answers 200; the seconds it took. FleetError if the process exits or time runs out."""
    started = time.monotonic()
    deadline = started + timeout
    last = "no answer yet"
    while True:
        code = process.popen.poll()
        if code is not None:
            raise FleetError(f"{process.name} exited with {code} while starting; last lines of {process.log}: "
                             f"{log_tail(process.log)}")
        try:
            status, body = get(url, context, timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            if status == 200:
                return time.monotonic() - started
            last = f"HTTP {status} {body[:120].decode(errors='replace').strip()}"
        except (OSError, ssl.SSLError) as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise FleetError(f"{process.name} not ready at {url} after {timeout:.0f} s ({last}); last lines of "
                             f"{process.log}: {log_tail(process.log)}")
        time.sleep(POLL_SECONDS)


def stop_all(processes: Sequence[Process], grace: float = STOP_GRACE_SECONDS) -> list[str]:
    """SIGTERM every process group, SIGKILL them after `grace` s; the names that were still running then.

    A leader is reaped only after its group got SIGKILL: until then its pid (alive or a zombie) keeps the group
    id ours, so a signal never reaches a group that reused the number. One reaped before (it exited while
    starting) is not signalled again.
    """
    running = [process for process in processes if process.popen.returncode is None]
    for process in running:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(_exited(process) for process in running):
        time.sleep(0.05)
    killed = [process.name for process in running if not _exited(process)]
    for process in running:
        _signal_group(process, signal.SIGKILL)  # also any child the leader left behind
        process.popen.wait()
    return killed


def _exited(process: Process) -> bool:
    """Has the leader exited? Asked without reaping it (WNOWAIT)."""
    try:
        info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _signal_group(process: Process, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone (PermissionError: only a zombie leader left, on some kernels)
