"""Fake sysfs mounts holding `devices/system/node`, shaped like the kernel's, for tests of every layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from numa_align.cpulist import format_cpulist, parse_cpulist
from numa_align.sysfs import node_dir


def write_node_tree(
    sysfs: Path,
    cells: Mapping[int, str],
    memory_kib: Mapping[int, int] | int = 2 * 1024 * 1024,
    distances: Mapping[int, Sequence[int]] | None = None,
    hugepages: Mapping[int, Mapping[int, int]] | None = None,
) -> Path:
    """Write node/online and nodeN/{cpulist,meminfo,distance,hugepages} under `sysfs`/devices/system;
    return `sysfs`, the mount point every `--sysfs-root` and NUMA_SYSFS_ROOT takes.

    cells maps node id -> cpulist; distances default to 10 on the diagonal and 20 elsewhere;
    hugepages maps node id -> {page size KiB: count}.
    """
    base = node_dir(sysfs)
    base.mkdir(parents=True, exist_ok=True)
    ids = sorted(cells)
    (base / "online").write_text(format_cpulist(ids) + "\n")
    (base / "possible").write_text(format_cpulist(ids) + "\n")
    for node in ids:
        nd = base / f"node{node}"
        nd.mkdir(exist_ok=True)
        (nd / "cpulist").write_text(cells[node] + "\n")
        for cpu in parse_cpulist(cells[node]):
            (nd / f"cpu{cpu}").mkdir(exist_ok=True)
        kib = memory_kib[node] if isinstance(memory_kib, Mapping) else memory_kib
        (nd / "meminfo").write_text(
            f"Node {node} MemTotal:       {kib} kB\nNode {node} MemFree:        {kib // 2} kB\n"
        )
        row = distances[node] if distances else [10 if other == node else 20 for other in ids]
        (nd / "distance").write_text(" ".join(str(d) for d in row) + "\n")
        pages = (hugepages or {}).get(node, {2048: 0, 1048576: 0})
        for size_kib, count in pages.items():
            hp = nd / "hugepages" / f"hugepages-{size_kib}kB"
            hp.mkdir(parents=True, exist_ok=True)
            (hp / "nr_hugepages").write_text(f"{count}\n")
            (hp / "free_hugepages").write_text(f"{count}\n")
    return sysfs
