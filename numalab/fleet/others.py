"""Fleet control planes already running on this machine, found before a bench run starts its own.

Every figure the bench prints is paid for in the machine's CPU: a plane left running (a run killed hard, a test's
plane, a second `make scale`) takes its share and the figures come out lower with nothing to say why (seen: 100-node
sides at 36.5 and 15 pods/s instead of about 50 and 30-38, beside a 5,000-node plane still creating its burst). A
plane's processes name their directory, made by controlplane.ControlPlane under PLANE_PREFIX, on their command lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PLANE_PREFIX = "numalab-fleet-"


def running_planes(proc: Path = Path("/proc"), own: Iterable[int] = ()) -> dict[str, list[tuple[int, str]]]:
    """Plane directory -> the (pid, program) of each process naming it, apart from `own` pids."""
    skip = set(own)
    found: dict[str, list[tuple[int, str]]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        words = [arg.decode(errors="replace") for arg in args if arg]
        directory = next((_plane_dir(word) for word in words if f"/{PLANE_PREFIX}" in word), None)
        if directory and words:
            found.setdefault(directory, []).append((int(entry.name), Path(words[0]).name))
    return {directory: sorted(processes) for directory, processes in found.items()}


def _plane_dir(word: str) -> str:
    """The plane directory within an argument (`--kubeconfig=/tmp/numalab-fleet-x/admin.conf` -> its directory)."""
    path = word.split("=", 1)[-1]
    head, _, tail = path.partition(f"/{PLANE_PREFIX}")
    return f"{head}/{PLANE_PREFIX}{tail.split('/', 1)[0]}"


def refusal(planes: dict[str, list[tuple[int, str]]]) -> str | None:
    """The one line refusing a run beside `planes`, or None when there is none."""
    if not planes:
        return None
    directory, processes = sorted(planes.items())[0]
    named = ", ".join(f"{program} ({pid})" for pid, program in sorted(processes))
    more = f" and {len(planes) - 1} other plane(s)" if len(planes) > 1 else ""
    return (f"another fleet control plane is running ({directory}: {named}){more}; its CPU would lower every figure "
            "of this run: stop it first")
