"""The kubelet's boot guard: after a reboot on changed hardware, move aside the manager checkpoint the kubelet
would refuse, so it comes back without a hand.

A CPU taken offline, a DIMM lost or a cell's memory resized take effect at a reboot, and the kubelet then
refuses its cpu_manager_state / memory_manager_state and stays down until someone removes them. This runs
before every kubelet start (ExecStartPre=- in the unit numa-lab writes) and acts only when all hold:
  - the boot id (/proc/sys/kernel/random/boot_id) differs from the one it saved at the kubelet's last start
    in this or an earlier boot (none saved: it saves this one and does nothing: it cannot tell);
  - a checkpoint no longer matches the machine, by numalab.model.kubelet_checkpoints (the deploy's reset plan
    uses the same code);
  - no container can be alive: no process in any cgroup under kubepods (.slice: systemd driver; without:
    cgroupfs; cgroup v2 and every v1 hierarchy) and no containerd task in the k8s.io namespace (upstream's
    /run/containerd and RKE2's /run/k3s/containerd).
It then renames the file to <file>.mismatch-<boot id> (kept, never deleted) and says so on stderr (the
journal) and in RECORD, which numa-align reads at its start for a metric and an Event on the Node (the guard
runs before the kubelet, with no API server to count on and no credentials). With a live container it
leaves everything (the kubelet's own refusal shows) and checks again at the next start. Any unexpected
error: a message, exit 0: the guard never keeps the kubelet from starting.

Standard library only: the node runs it with the system python3 from an archive that holds this module and
the project's modules it imports (numalab.deploy.checkpoints builds it). A start in the same boot imports
nothing but os and sys (no argparse, no pathlib: 20 of its 45 ms here, more on an emulated guest); the
checks are imported when needed.
"""

from __future__ import annotations

import os
import sys

PREFIX = "numa-lab kubelet guard"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
SAVED_BOOT_ID = "/var/lib/numa-lab/kubelet-boot-id"
RECORD = "/var/lib/numa-lab/kubelet-guard.json"
"""What the guard moved aside, and at which boot: {"bootId": ..., "moved": [{"file", "aside", "reason"}]}.
Written only when something moved (replacing the record of an earlier boot); numa_align.guard_report reads it."""
CGROUP_ROOT = "/sys/fs/cgroup"
POD_CGROUPS = ("kubepods.slice", "kubepods")  # under the v2 root, and under each v1 hierarchy
CONTAINERD_TASKS = (
    "/run/containerd/io.containerd.runtime.v2.task/k8s.io",
    "/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io",
)
PROJECT_PACKAGES = ("numalab", "numa_align")
"""The archive holds this module and every module of these packages it imports, found from the imports."""
USAGE = "usage: kubelet-guard [--root DIR] [--strict-reserved-cpus CPULIST]"


def main(argv: list[str] | None = None) -> int:
    """Always 0: a failing ExecStartPre would keep the kubelet down, which is the guard's own bug.
    --root: the file system root (tests give a fake one); --strict-reserved-cpus: the kubelet's
    reservedSystemCPUs when strict-cpu-reservation is on."""
    try:
        options = _options(sys.argv[1:] if argv is None else argv)
        for line in guard(options.get("root", "/"), options.get("strict-reserved-cpus")):
            print(f"{PREFIX}: {line}", file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001 - whatever it is, never block the kubelet
        print(f"{PREFIX}: unexpected error, checkpoints left as they are: {exc!r}", file=sys.stderr)
    return 0


def guard(root: str, strict_reserved_cpus: str | None = None) -> list[str]:
    """Do the guard's work under `root` (/ on a node, a fake tree in tests); returns what it says."""
    boot = _read(root, BOOT_ID).strip()
    saved = _text(root, SAVED_BOOT_ID)
    if saved is not None and saved.strip() == boot:
        return []  # restarted within the boot that wrote the checkpoints: they describe this machine
    if saved is None:
        _save_boot_id(root, boot)
        return []
    from numalab.model.kubelet_checkpoints import CPU_MANAGER_STATE, MEMORY_MANAGER_STATE

    texts = [_text(root, path) for path in (CPU_MANAGER_STATE, MEMORY_MANAGER_STATE)]
    mismatches = _mismatches(root, texts, strict_reserved_cpus) if any(t is not None for t in texts) else []
    if not mismatches:
        _save_boot_id(root, boot)
        return []
    alive = live_containers(root)
    if alive:
        return [f"{mismatch}; left in place: a container may be alive ({alive[0]})" for mismatch in mismatches]
    said, moved = [], []
    for mismatch in mismatches:
        aside = f"{mismatch.path}.mismatch-{boot}"
        os.rename(_under(root, mismatch.path), _under(root, aside))
        said.append(f"moved {mismatch.path} to {aside} (boot id changed, no container alive): {mismatch.reason}")
        moved.append({"file": mismatch.path, "aside": aside, "reason": mismatch.reason})
    _sync_directory(os.path.dirname(_under(root, mismatches[0].path)))
    _save_record(root, boot, moved)  # before the boot id: a reset between them leaves no move unrecorded
    _save_boot_id(root, boot)
    return said


def live_containers(root: str) -> list[str]:
    """Where a container may still run: pod cgroups holding a process, containerd tasks of Kubernetes."""
    found = []
    cgroups = _under(root, CGROUP_ROOT)
    hierarchies = [cgroups] + [entry.path for entry in _entries(cgroups) if entry.is_dir()]
    for base in (os.path.join(h, name) for h in hierarchies for name in POD_CGROUPS):
        for directory, _, names in os.walk(base):
            if "cgroup.procs" in names and _text(directory, "cgroup.procs", "").strip():
                found.append(f"a process in {directory.removeprefix(root.rstrip('/'))}")
                break
    for tasks in CONTAINERD_TASKS:
        if _entries(_under(root, tasks)):
            found.append(f"containerd tasks in {tasks}")
    return found


def _mismatches(root: str, texts: list[str | None], strict_reserved_cpus: str | None) -> list:
    from numa_align.cpulist import parse_cpulist
    from numa_align.sysfs import read_sysfs

    from numalab.model.kubelet_checkpoints import Machine, checkpoint_mismatches

    machine = Machine.from_sysfs(read_sysfs(_under(root, "/sys")))
    reserved = parse_cpulist(strict_reserved_cpus or "")
    return checkpoint_mismatches(*texts, machine, reserved_cpus=reserved,
                                 strict_cpu_reservation=strict_reserved_cpus is not None)


def _options(argv: list[str]) -> dict[str, str]:
    """--name=value or --name value, for the two names main() takes (argparse alone would double the
    guard's start)."""
    options: dict[str, str] = {}
    words = list(argv)
    while words:
        name, equals, value = words.pop(0).partition("=")
        if name not in ("--root", "--strict-reserved-cpus") or not (equals or words):
            raise ValueError(f"{USAGE} (got {name!r})")
        options[name[2:]] = value if equals else words.pop(0)
    return options


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _read(root: str, path: str) -> str:
    with open(_under(root, path), errors="replace") as file:
        return file.read()


def _text(root: str, path: str, absent: str | None = None) -> str | None:
    """The file's text; `absent` when it does not exist."""
    try:
        return _read(root, path)
    except FileNotFoundError:
        return absent


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as found:
            return list(found)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _save_boot_id(root: str, boot: str) -> None:
    _write_durably(_under(root, SAVED_BOOT_ID), boot + "\n")


def _save_record(root: str, boot: str, moved: list[dict[str, str]]) -> None:
    import json

    _write_durably(_under(root, RECORD), json.dumps({"bootId": boot, "moved": moved}, indent=2) + "\n")


def _write_durably(target: str, text: str) -> None:
    """Written to a new file beside `target`, flushed, renamed over it, the directory flushed: a hard reset
    leaves the old text or the new one, never a part."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    new = target + ".new"
    with open(new, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(new, target)
    _sync_directory(os.path.dirname(target))


def _sync_directory(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


if __name__ == "__main__":
    sys.exit(main())
