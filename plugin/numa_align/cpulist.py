"""The kernel's cpulist syntax ("0-3,8-11"), shared by the plugin and the numa-lab model.

It lives in the plugin distribution because a node installs only the plugin; numa-lab imports it.
"""

from __future__ import annotations

from collections.abc import Iterable


class CpulistError(ValueError):
    """A cpulist string that the kernel would not write or accept."""


def parse_cpulist(text: str) -> frozenset[int]:
    """Parse "0-3,8,10-11" into a set of ids; an empty string (or only whitespace) is the empty set."""
    text = text.strip()
    if not text:
        return frozenset()
    ids: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo_text, sep, hi_text = part.partition("-")
        try:
            lo = _number(lo_text)
            hi = _number(hi_text) if sep else lo
        except ValueError:
            raise CpulistError(f"{text!r} is not a cpulist: bad part {part!r} (expected N or N-M)") from None
        if hi < lo:
            raise CpulistError(f"{text!r} is not a cpulist: range {part!r} runs backwards")
        ids.update(range(lo, hi + 1))
    return frozenset(ids)


def format_cpulist(ids: Iterable[int]) -> str:
    """Print ids the way the kernel does: sorted, consecutive runs folded into N-M."""
    ordered = sorted(set(ids))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


def _number(text: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ValueError(text)
    return int(text)
