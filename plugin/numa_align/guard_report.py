"""What numa-lab's kubelet guard moved aside at this boot, from the record it leaves on the node.

The guard runs before the kubelet starts, after a reboot on changed hardware, and moves aside a CPU or
Memory Manager checkpoint the kubelet would refuse (numalab.checkpoint_guard). It has no API server to count
on and no credentials, so it writes RECORD; numa-align reads it whenever it changes (GuardRecord: a stat a
poll; the kubelet, and so the guard, may start after numa-align at boot, or be started again by hand after a
refusal) and shows each entry of this boot as a metric and, when it publishes, as an Event on its Node. An
entry of an earlier boot is old news: the record stays until the guard moves something again, and a restart
of numa-align must not repeat it.

The boot id is the host's in a container too (/proc/sys/kernel/random/boot_id is not namespaced). RECORD is
the guard's path, given twice because the plugin is a distribution of its own (a numa-lab test keeps the two
equal); the DaemonSet mounts its directory at the same path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

RECORD = Path("/var/lib/numa-lab/kubelet-guard.json")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class SetAside:
    """One checkpoint the guard moved: `file` to `aside`, at boot `boot_id`, because `reason`."""

    file: str
    aside: str
    reason: str
    boot_id: str


def set_aside_this_boot(record: Path = RECORD, boot_id: Path = BOOT_ID) -> list[SetAside]:
    """The record's entries when it was written at this boot; [] when there is none or it is older. A record
    that cannot be read is logged as a warning naming it (numa-align runs on without it)."""
    try:
        text = record.read_text()
        boot = boot_id.read_text().strip()
    except FileNotFoundError as exc:
        if exc.filename == str(record):
            return []
        log.warning("cannot read this boot's id from %s (%s): the kubelet guard's record %s is not shown",
                    boot_id, exc.strerror, record)
        return []
    except OSError as exc:
        log.warning("cannot read the kubelet guard's record %s: %s", record, exc)
        return []
    try:
        written = json.loads(text)
        if written["bootId"] != boot:
            return []
        return [SetAside(*(_text(entry, key) for key in ("file", "aside", "reason")), boot)
                for entry in written["moved"]]
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("the kubelet guard's record %s is not what the guard writes (%s: %s), so it is not shown; "
                    'expected {"bootId": ..., "moved": [{"file": ..., "aside": ..., "reason": ...}]}', record,
                    type(exc).__name__, exc)
        return []


def _text(entry: dict, key: str) -> str:
    value = entry[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is {value!r}, not a string")
    return value


_UNREAD = object()
"""What GuardRecord has seen before its first read: equal to no stat, an absent record's None included."""


class GuardRecord:
    """The record, read again each time it changes: `changed()` is a stat when it has not."""

    def __init__(self, record: Path = RECORD, boot_id: Path = BOOT_ID) -> None:
        self.record, self.boot_id = record, boot_id
        self._seen: object = _UNREAD

    def changed(self) -> list[SetAside] | None:
        """This boot's entries when the record changed since the last call (the first call reads it), else
        None."""
        try:
            found = self.record.stat()
            key: tuple[int, int, int] | None = (found.st_ino, found.st_mtime_ns, found.st_size)
        except OSError:
            key = None
        if key == self._seen:
            return None
        self._seen = key
        return set_aside_this_boot(self.record, self.boot_id) if key is not None else []
