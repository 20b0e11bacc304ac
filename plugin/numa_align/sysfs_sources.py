"""Where numa-align's reader gets the files under `devices/system`: a mounted sysfs or a dump a host printed.

Both answer the same three questions (a file's text, a directory's names, how to name a file in an error), so
`numa_align.sysfs.read_host` reads a local tree and a remote host's dump the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

SYSTEM_DIR = "devices/system"
"""What the reader reads, relative to the sysfs mount."""
DUMP_HEADER = "==> "
DUMP_FAILED = "==! "


class SysfsError(RuntimeError):
    """The tree is missing a file the kernel always writes, or holds something unreadable."""


class Source(Protocol):
    """Files under `devices/system`, by path relative to it."""

    def read(self, path: str) -> str | None:
        """The file's text; None when it does not exist; SysfsError when it exists but cannot be read."""

    def children(self, path: str) -> list[str]:
        """Names in a directory; [] when it does not exist."""

    def name(self, path: str) -> str:
        """How an error names the file."""


class SysfsTree:
    """A mounted sysfs (/sys, /host/sys, a fake tree)."""

    def __init__(self, sysfs: str | Path = "/sys") -> None:
        self.base = Path(sysfs) / SYSTEM_DIR

    def read(self, path: str) -> str | None:
        target = self.base / path
        try:
            return target.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SysfsError(f"cannot read {target}: {exc.strerror}") from None

    def children(self, path: str) -> list[str]:
        try:
            return sorted(entry.name for entry in (self.base / path).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def name(self, path: str) -> str:
        return str(self.base / path)


DUMP_COMMAND = (
    "cd /sys/devices/system && for f in node/online node/possible cpu/online node/node[0-9]*/cpulist "
    "node/node[0-9]*/meminfo node/node[0-9]*/distance node/node[0-9]*/hugepages/hugepages-*/nr_hugepages "
    "cpu/cpu[0-9]*/topology/thread_siblings_list cpu/cpu[0-9]*/topology/physical_package_id; do "
    '[ -e "$f" ] || continue; '
    f'if c=$(cat "$f" 2>&1); then echo "{DUMP_HEADER}$f"; else echo "{DUMP_FAILED}$f"; fi; '
    'printf "%s\\n" "$c"; done; '
    f'for f in node/node[0-9]*/cpu[0-9]*; do [ -e "$f" ] && echo "{DUMP_HEADER}$f"; done; true'
)
"""A shell line that prints every file `read_host` reads, each after a `==> path` line (`==! path` when
cat failed, followed by its error), and each node's `cpuN` entry as a `==> path` line alone: what the
deploy's fact runs on a remote host."""


class SysfsDump:
    """The files DUMP_COMMAND printed on a host; `where` names them in errors (e.g. 'worker-1:/sys')."""

    def __init__(self, lines: Iterable[str], where: str = "/sys") -> None:
        self.where = where
        blocks: dict[str, list[str]] = {}
        failed: set[str] = set()
        current: list[str] | None = None
        for line in lines:
            if line.startswith((DUMP_HEADER, DUMP_FAILED)):
                path = line[len(DUMP_HEADER):].strip()
                current = blocks[path] = []
                if line.startswith(DUMP_FAILED):
                    failed.add(path)
            elif current is not None:
                current.append(line)
        self.files = {path: "\n".join(text) + "\n" for path, text in blocks.items() if path not in failed}
        self.failed = {path: " ".join(blocks[path]).strip() for path in failed}

    def read(self, path: str) -> str | None:
        if path in self.failed:
            raise SysfsError(f"cannot read {self.name(path)}: {self.failed[path]}")
        return self.files.get(path)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.files if p.startswith(prefix)})

    def name(self, path: str) -> str:
        return f"{self.where}/{SYSTEM_DIR}/{path}"
