"""Where a container's cgroup is and which cpuset it really runs with: cgroup v2, read-only.

The kubelet names a pod's cgroup after its QoS class and UID, the runtime names the container's after its id,
and the two cgroup drivers spell them differently (the kubelet's cm/cgroup_manager_linux.go; containerd's,
CRI-O's and cri-dockerd's systemd scopes):

    systemd:  kubepods.slice/[kubepods-<qos>.slice/]kubepods[-<qos>]-pod<uid, '-' as '_'>.slice/<runtime>-<id>.scope
    cgroupfs: kubepods/[<qos>/]pod<uid>/<id>

Guaranteed pods sit right under kubepods, Burstable and BestEffort pods one level lower. Nothing here is told
the driver or the QoS class: every layout is tried and the first directory that exists wins (a node uses one
driver, and a pod has one class), a few stat calls per container.

The root is the host's cgroup2 mount: /sys/fs/cgroup on a host, /host/sys/fs/cgroup in the DaemonSet (its
sysfs hostPath is mounted recursively, and a bind mount of the host's tree shows all of it whatever the
container's cgroup namespace). A root that cannot be read, or a container's cpuset file that cannot, is a
CgroupUnreadable naming the path; a container with no cgroup (not started yet, exited, or restarted under a
new id) is None, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from numa_align.cpulist import CpulistError, parse_cpulist

CPUS = "cpuset.cpus.effective"
MEMS = "cpuset.mems.effective"
CONTROLLERS = "cgroup.controllers"
SCOPE_PREFIXES = {"containerd": "cri-containerd", "cri-o": "crio", "docker": "docker"}
"""The systemd scope's prefix per runtime, by the scheme of the container id the API shows ("containerd://…")."""
QOS_CLASSES = ("", "burstable", "besteffort")
"""Guaranteed pods ("") directly under kubepods, the others in a slice (directory) of their class."""


class CgroupUnreadable(RuntimeError):
    """The cgroup tree, or a container's cpuset in it, cannot be read; str() names the path and what to check."""


@dataclass(frozen=True)
class Cpuset:
    """What the kernel lets a container use: CPUs and NUMA nodes (cpuset.cpus/mems.effective)."""

    cpus: frozenset[int]
    mems: frozenset[int]


def container_dirs(root: Path, pod_uid: str, container_id: str) -> list[Path]:
    """Where the container's cgroup may be, systemd layouts first; `container_id` as the API gives it
    ("containerd://<id>") or bare (then every runtime's scope prefix is tried)."""
    runtime, _, bare = container_id.rpartition("://")
    prefixes = [SCOPE_PREFIXES[runtime]] if runtime in SCOPE_PREFIXES else list(SCOPE_PREFIXES.values())
    escaped = pod_uid.replace("-", "_")
    systemd, cgroupfs = [], []
    for qos in QOS_CLASSES:
        if qos:
            pod_slice = root / "kubepods.slice" / f"kubepods-{qos}.slice" / f"kubepods-{qos}-pod{escaped}.slice"
            pod_dir = root / "kubepods" / qos / f"pod{pod_uid}"
        else:
            pod_slice = root / "kubepods.slice" / f"kubepods-pod{escaped}.slice"
            pod_dir = root / "kubepods" / f"pod{pod_uid}"
        systemd += [pod_slice / f"{prefix}-{bare}.scope" for prefix in prefixes]
        cgroupfs.append(pod_dir / bare)
    return systemd + cgroupfs


class CgroupReader:
    """Reads containers' cpusets under `root`; `check()` first, once per audit, says whether the tree is there."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def check(self) -> None:
        """Raise CgroupUnreadable unless `root` is a cgroup v2 tree with the cpuset controller."""
        controllers = _read(self.root / CONTROLLERS, "the cgroup v2 root")
        if "cpuset" not in controllers.split():
            raise CgroupUnreadable(f"{self.root / CONTROLLERS} lists no cpuset controller ({controllers.strip()!r}):"
                                   " the kubelet's CPU Manager needs it")

    def read(self, pod_uid: str, container_id: str) -> Cpuset | None:
        """The container's cpuset, or None when it has no cgroup under any layout."""
        for directory in container_dirs(self.root, pod_uid, container_id):
            try:
                found = directory.is_dir()
            except OSError as exc:  # EACCES on a parent: is_dir() ignores only "no such file" errors
                raise CgroupUnreadable(f"cannot look at {directory}: {exc.strerror}") from None
            if found:
                return Cpuset(_cpulist(directory / CPUS), _cpulist(directory / MEMS))
        return None


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CgroupUnreadable(f"cannot read {what} {path}: {exc.strerror or type(exc).__name__} "
                               "(NUMA_ALIGN_CGROUP_ROOT names the host's cgroup2 mount)") from None


def _cpulist(path: Path) -> frozenset[int]:
    text = _read(path, "the cpuset file")
    try:
        return parse_cpulist(text)
    except CpulistError as exc:
        raise CgroupUnreadable(f"{path}: {exc}") from None
