"""Fake sysfs mounts holding `devices/system/{node,cpu}`, shaped like the kernel's, for tests of every layer.

Real servers' shapes are written with the same function: SMT (threads_per_core, or cores given as
cpulists like Intel's `0,28`), offline CPUs (still in their node's cpulist, absent from `cpu/online`),
memory-only nodes (an empty cpulist), nodes with nothing (an empty cpulist and 0 kB), sparse node ids, nodes
possible but offline, asymmetric distance rows, distance files with a column per possible node, and any
hugepage size (arm64's 64kB to 16GB ones).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from numa_align.cpulist import format_cpulist, parse_cpulist
from numa_align.sysfs import node_dir

GIB_KIB = 1024 * 1024


def write_node_tree(
    sysfs: Path,
    cells: Mapping[int, str],
    memory_kib: Mapping[int, int] | int = 2 * GIB_KIB,
    distances: Mapping[int, Sequence[int]] | None = None,
    hugepages: Mapping[int, Mapping[int, int]] | None = None,
    *,
    threads_per_core: int = 1,
    cores: Sequence[str] | None = None,
    offline_cpus: str = "",
    offline_nodes: Collection[int] = (),
    packages: Mapping[int, int] | None = None,
    offline_in_cpulist: bool = False,
    distance_columns: str = "online",
) -> Path:
    """Write node/{online,possible}, nodeN/{cpulist,meminfo,distance,hugepages}, cpu/online and each online
    CPU's topology/{thread_siblings_list,physical_package_id} under `sysfs`/devices/system; return `sysfs`,
    the mount point every `--sysfs-root` and NUMA_SYSFS_ROOT takes.

    cells maps node id -> cpulist ("" for a memory-only node); distances map node id -> its row, written as
    given, by default 10 on the diagonal and 20 elsewhere, one column per online node as the kernel writes it
    or, with distance_columns="possible", one per possible node (offline nodes included, as some kernels and
    captured trees have it); hugepages maps node id -> {page size KiB: count}, any size. Cores are `cores`
    (cpulists) or runs of `threads_per_core` consecutive ids, as QEMU numbers threads. Offline CPUs vanish
    from cpu/online and from their siblings' lists and keep their node's `cpuN` entry; they leave the node's
    cpulist too, as an x86 kernel does (Linux 6.12 in a lab guest), unless offline_in_cpulist (other
    architectures). A CPU's package is its node's id unless `packages` maps node id -> package.
    """
    base = node_dir(sysfs)
    base.mkdir(parents=True, exist_ok=True)
    ids = sorted(cells)
    possible = sorted(set(ids) | set(offline_nodes))
    columns = {"online": ids, "possible": possible}[distance_columns]
    (base / "online").write_text(format_cpulist(ids) + "\n")
    (base / "possible").write_text(format_cpulist(possible) + "\n")
    all_cpus = {cpu: node for node in ids for cpu in parse_cpulist(cells[node])}
    offline = parse_cpulist(offline_cpus)
    online = set(all_cpus) - offline
    for node in ids:
        nd = base / f"node{node}"
        nd.mkdir(exist_ok=True)
        listed = parse_cpulist(cells[node])
        (nd / "cpulist").write_text(format_cpulist(listed if offline_in_cpulist else listed - offline) + "\n")
        for cpu in parse_cpulist(cells[node]):
            (nd / f"cpu{cpu}").mkdir(exist_ok=True)
        kib = memory_kib[node] if isinstance(memory_kib, Mapping) else memory_kib
        (nd / "meminfo").write_text(
            f"Node {node} MemTotal:       {kib} kB\nNode {node} MemFree:        {kib // 2} kB\n"
        )
        row = distances[node] if distances else [10 if other == node else 20 for other in columns]
        (nd / "distance").write_text(" ".join(str(d) for d in row) + "\n")
        pages = (hugepages or {}).get(node, {2048: 0, 1048576: 0})
        for size_kib, count in pages.items():
            hp = nd / "hugepages" / f"hugepages-{size_kib}kB"
            hp.mkdir(parents=True, exist_ok=True)
            (hp / "nr_hugepages").write_text(f"{count}\n")
            (hp / "free_hugepages").write_text(f"{count}\n")
    cpu_base = sysfs / "devices/system/cpu"
    cpu_base.mkdir(parents=True, exist_ok=True)
    (cpu_base / "online").write_text(format_cpulist(online) + "\n")
    (cpu_base / "possible").write_text(format_cpulist(all_cpus) + "\n")
    for core in _cores(sorted(all_cpus), threads_per_core, cores):
        for cpu in core:
            directory = cpu_base / f"cpu{cpu}"
            directory.mkdir(exist_ok=True)
            (directory / "online").write_text(f"{int(cpu in online)}\n")
            if cpu not in online:
                continue  # the kernel removes an offline CPU's topology directory
            node = all_cpus[cpu]
            topology = directory / "topology"
            topology.mkdir(exist_ok=True)
            (topology / "thread_siblings_list").write_text(format_cpulist(set(core) & online) + "\n")
            (topology / "physical_package_id").write_text(f"{(packages or {}).get(node, node)}\n")
    return sysfs


def _cores(cpus: list[int], threads: int, cores: Sequence[str] | None) -> list[frozenset[int]]:
    if cores is not None:
        given = [parse_cpulist(core) for core in cores]
        assert sorted(c for core in given for c in core) == cpus, "cores must cover every CPU once"
        return given
    return [frozenset(cpus[i:i + threads]) for i in range(0, len(cpus), threads)]
