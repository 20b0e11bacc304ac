"""numa-lab's fix for scheduler-plugins#967, carried in the numa-scheduler build: Go sources of ours and their test.

Upstream's NodeResourceTopologyMatch fills its OverReserve cache with one List at start and never adds an object
after that, so a node whose object is created later (a node added, or deleted and registered again: its
object is owned by the Node) is passed by Filter with no NUMA check, until the scheduler restarts. The cause,
function by function, and the fix are in scheduler_go/nrtadopt/adopt.go's package comment: a plugin
constructor of ours registered under upstream's name, which returns upstream's plugin unchanged and hands its
cache, through the cache's exported FlushNodes, each object whose node it lacks or holds under another UID.
A second part (scheduler_go/nrtadopt/bound.go) makes the cache's resync count every pod bound to the node that
has not finished, and the pods it reserved whose binding is not seen yet, where upstream counts Running pods
only and so flushes away the reservation of a pod bound but not yet admitted (the fleet bench's rejections
under a burst); window.go reserves again, in Filter, the pods reserved since the resync's list began, which its
flush drops too. A third (idle.go) flushes a node marked for resync on which no pod is bound when its object
says so: upstream's resync skips such a node ("cannot find any pod for node") for good.

The Go sources live in scheduler_go/ (our code only; no upstream file is copied or patched) and are copied into
the wrapper module. Their `go test` runs before `go build`, so no binary is cached with a fix whose test fails,
and their digest is part of the cache key: a changed fix rebuilds, an unchanged one is reused.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import IO

from numalab.k8s.building import run_logged
from numalab.k8s.errors import BinariesError
from numalab.progress import Progress

GO_SOURCES = Path(__file__).with_name("scheduler_go")
FIX_PACKAGE = "nrtadopt"
FIX_TESTS = (
    "TestTheFixedPluginUsesObjectsMadeAfterItStarted",
    "TestUpstreamIgnoresObjectsMadeAfterItStarted",
    "TestOnlyTheOverReserveCacheIsAdopted",
    "TestTheFixedPluginFlushesAMarkedNodeWithNoPodBound",
    "TestUpstreamKeepsAMarkedNodeWithNoPodBoundMarked",
    "TestSweepFlushesOnlyIdleNodesWhoseObjectSaysSo",
    "TestTheFixedPluginKeepsAReservationUntilTheObjectShowsThePod",
    "TestUpstreamForgetsAReservationTheObjectDoesNotShowYet",
    "TestTheResyncCountsBoundUnfinishedPodsAndHeldOnes",
    "TestHeldPodsArePrunedWithoutAResync",
    "TestTheFixedPluginKeepsAPodReservedWhileTheResyncReads",
    "TestUpstreamForgetsAPodReservedWhileTheResyncReads",
    "TestTheWindowHoldsPodsUntilTheNextListOrAMinute",
)
"""Every test of the fix: the build refuses a run in which one of them did not pass (renamed, skipped, lost)."""

_PASSED = re.compile(r"^--- PASS: (\S+)")
_FAILED = re.compile(r"^\s*--- FAIL: (\S+)")
_TEST_LINE = re.compile(r"^\s*--- (?:PASS|FAIL|SKIP): ")


def fix_sources(root: Path | None = None) -> dict[str, bytes]:
    """Every .go file under root (GO_SOURCES), by its path relative to root (the wrapper module's layout)."""
    root = root or GO_SOURCES
    sources = {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*.go"))}
    if not any(name.startswith(f"{FIX_PACKAGE}/") for name in sources):
        raise BinariesError(f"no Go sources of package {FIX_PACKAGE} under {root}: the numa-scheduler fix is missing")
    return sources


def fix_digest(root: Path | None = None) -> str:
    """12 hex digits of sha256 over the sources' names and contents: the cache key's part for the fix."""
    digest = hashlib.sha256()
    for name, content in fix_sources(root).items():
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:12]


def copy_fix(module: Path, root: Path | None = None) -> None:
    """Write the fix's sources into the wrapper module at `module`."""
    for name, content in fix_sources(root).items():
        target = module / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def go_test_fix(go: str, module: Path, env: dict[str, str], log: IO[str], progress: Progress) -> list[str]:
    """Run the fix's `go test` in `module` (the build's flags, so the build reuses what it compiles); the tests passed.

    A failing or missing test raises BinariesError naming it.
    """
    start = log.tell()
    argv = [go, "test", "-trimpath", "-v", f"./{FIX_PACKAGE}/"]
    try:
        run_logged(argv, module, env, log, progress, _TEST_LINE, "tests run")
    except BinariesError:
        failed = [match.group(1) for line in _output(log, start) if (match := _FAILED.match(line))]
        if failed:
            raise BinariesError(f"the fix's go test failed {', '.join(failed)}; full output in {log.name}") from None
        raise
    passed = sorted({match.group(1) for line in _output(log, start) if (match := _PASSED.match(line))})
    missing = [name for name in FIX_TESTS if name not in passed]
    if missing:
        raise BinariesError(f"the fix's go test ran but did not pass {', '.join(missing)}; full output in {log.name}")
    return passed


def _output(log: IO[str], start: int) -> list[str]:
    """The lines `log` got since offset `start`."""
    log.flush()
    with open(log.name) as output:
        output.seek(start)
        return output.read().splitlines()
