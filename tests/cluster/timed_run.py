"""A deploy run of the cluster test with each output line's time: where a run's minutes go, by phase and by
operation, so the CI budget can be spent on what is slow rather than guessed at.

pyinfra prints `--> Connecting to hosts...` (the lab's guests come up here), `--> Preparing operation
files...` (every host's facts are read while the deploy is planned), `--> Beginning operation run...` and one
`--> Starting operation: NAME` per operation; the time between those lines is what each took.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PHASES = {
    "--> Connecting to hosts...": "connect (lab up)",
    "--> Preparing operation files...": "plan (facts)",
    "--> Beginning operation run...": "operations",
    "--> Results:": "results",
}
OPERATION = re.compile(r"^--> Starting (?:[\w ,]+ )?operation: (.*)$")


@dataclass(frozen=True)
class Timed:
    """A finished run: what subprocess.run would give (stderr folded into stdout), and each line's second."""

    completed: subprocess.CompletedProcess[str]
    lines: tuple[tuple[float, str], ...]  # (seconds since the start, the line without colour codes)

    def phases(self) -> list[tuple[str, float]]:
        """(phase, seconds) in order, each up to the next phase's line or the end."""
        return _spans([(at, PHASES[line]) for at, line in self.lines if line in PHASES], self._end())

    def slowest_operations(self, count: int = 5) -> list[tuple[str, float]]:
        """The `count` operations that took longest (an operation's name may repeat: each run is its own)."""
        starts = [(at, found.group(1).strip()) for at, line in self.lines if (found := OPERATION.match(line))]
        results = next((at for at, line in self.lines if line == "--> Results:"), self._end())
        spans = _spans(starts, results)
        return sorted(spans, key=lambda span: -span[1])[:count]

    def _end(self) -> float:
        return self.lines[-1][0] if self.lines else 0.0


def _spans(marks: Sequence[tuple[float, str]], end: float) -> list[tuple[str, float]]:
    return [(name, (marks[i + 1][0] if i + 1 < len(marks) else end) - at) for i, (at, name) in enumerate(marks)]


def run_timed(argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float, log: Path) -> Timed:
    """Run argv, keeping each output line with its time; the lines also go to `log` as they come (a run cut
    off by its timeout leaves what it had said there). Raises subprocess.TimeoutExpired as subprocess.run does."""
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    process = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace")
    with log.open("w") as out:
        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                at = time.monotonic() - started
                lines.append((at, ANSI.sub("", line.rstrip("\n"))))
                out.write(f"{at:8.1f} {line}")
                out.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            reader.join(timeout=10)
            raise subprocess.TimeoutExpired(list(argv), timeout,
                                            output="\n".join(line for _, line in lines)) from None
        reader.join()
    text = "".join(line + "\n" for _, line in lines)
    return Timed(subprocess.CompletedProcess(list(argv), process.returncode, text, ""), tuple(lines))
