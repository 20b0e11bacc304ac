"""Fake cgroup v2 trees for the cpuset audit: a root with the cpuset controller and containers' cgroups in
the kubelet's systemd or cgroupfs layout (numa_align.cgroups), each with its effective cpus and mems."""

from __future__ import annotations

from pathlib import Path


def write_cgroup_root(root: Path, controllers: str = "cpuset cpu io memory hugetlb pids") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    return root


def container_dir(root: Path, pod_uid: str, container_id: str, driver: str = "systemd", qos: str = "") -> Path:
    """Where the kubelet and containerd put a container's cgroup; qos "" (Guaranteed), burstable, besteffort."""
    if driver == "systemd":
        uid = pod_uid.replace("-", "_")
        parent = root / "kubepods.slice"
        if qos:
            parent = parent / f"kubepods-{qos}.slice" / f"kubepods-{qos}-pod{uid}.slice"
        else:
            parent = parent / f"kubepods-pod{uid}.slice"
        return parent / f"cri-containerd-{container_id}.scope"
    parent = root / "kubepods" / qos if qos else root / "kubepods"
    return parent / f"pod{pod_uid}" / container_id


def write_container(root: Path, pod_uid: str, container_id: str, cpus: str, mems: str, **layout: str) -> Path:
    directory = container_dir(root, pod_uid, container_id, **layout)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpuset.cpus.effective").write_text(cpus + "\n")
    (directory / "cpuset.mems.effective").write_text(mems + "\n")
    return directory
