"""`numa-align inspect`: where each pod's containers really sit, as the kubelet on this node sees it.

Sources, all local to the node: the kubelet PodResources API v1 (List and GetAllocatableResources on the
pod-resources unix socket) for exclusive CPUs, memory and devices per container; the CPU and Memory
Manager checkpoint files for the policies, the shared pool and the managers' own view of each container;
sysfs to map CPUs to NUMA nodes. /var/log/pods/<namespace>_<name>_<uid> gives the pod UIDs that key the
checkpoint files (PodResources reports pods by name only).

Older or plainer kubelets lack parts of this: no Memory Manager before 1.21 (no memory_manager_state),
policy None on many clusters, no GetAllocatableResources before 1.21 and only behind a feature gate before
1.23. The report then still places CPUs and devices and says memory affinity is not managed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist
from numa_align.kubelet_sources import (
    CPU_STATE,
    DEFAULT_POD_LOG_DIR,
    DEFAULT_SOCKET,
    DEFAULT_STATE_DIR,
    MEMORY_STATE,
    InspectError,
    PodResources,
    pod_uids,
    query_pod_resources,
    read_checkpoint,
    read_optional_checkpoint,
)
from numa_align.sysfs import SysfsError, read_sysfs

NUMA_ALIGN_PREFIX = "numa-align/"
MEMORY_NOT_MANAGED = "not managed by this kubelet"
"""What the report says of memory affinity when no Memory Manager policy places memory."""
ALLOCATABLE_NOT_SERVED = "not served by this kubelet"

EXIT_OK = 0
EXIT_UNAVAILABLE = 1


# --- the report ---------------------------------------------------------------------------------


def memory_unmanaged(memory_state: Mapping[str, Any] | None, path: str) -> str:
    """Why no Memory Manager policy places memory on this node, or '' when one does."""
    if memory_state is None:
        return f"no {path} (no Memory Manager before kubelet 1.21, nor in 1.21 without its feature gate)"
    if str(memory_state.get("policyName")).lower() == "none":
        return f"Memory Manager policy None in {path}"
    return ""


def _numa_ids(topology: pb.TopologyInfo) -> list[int]:
    return sorted({node.ID for node in topology.nodes})


def _cpu_numa(cpus: Iterable[int], node_cpus: Mapping[int, frozenset[int]]) -> list[int]:
    cpus = frozenset(cpus)
    return sorted(node for node, members in node_cpus.items() if members & cpus)


def _devices(devices: Iterable[pb.ContainerDevices]) -> list[dict[str, Any]]:
    return [
        {"resource": d.resource_name, "ids": sorted(d.device_ids), "numa": _numa_ids(d.topology)}
        for d in devices
    ]


def _memory(blocks: Iterable[pb.ContainerMemory]) -> list[dict[str, Any]]:
    return [{"type": m.memory_type, "size": m.size, "numa": _numa_ids(m.topology)} for m in blocks]


def _state_view(uid: str | None, name: str, cpu_state: Mapping[str, Any],
                memory_state: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """The managers' own record of a container, or None when the pod's UID is unknown."""
    if uid is None:
        return None
    cpuset = (cpu_state.get("entries") or {}).get(uid, {}).get(name)
    blocks = ((memory_state or {}).get("entries") or {}).get(uid, {}).get(name) or []
    try:
        cpus = None if cpuset is None else format_cpulist(parse_cpulist(cpuset))
    except CpulistError as exc:
        raise InspectError(f"{where}: {CPU_STATE} entry for {uid}/{name}: {exc}") from None
    affinity = sorted({int(n) for block in blocks for n in block.get("numaAffinity") or []})
    return {"cpus": cpus, "memory_numa": affinity}


def _allocatable(answer: PodResources, node_cpus: Mapping[int, frozenset[int]]) -> dict[str, Any]:
    """Allocatable CPUs per NUMA node, devices per resource and memory blocks; empty if not served."""
    allocatable = answer.allocatable
    if allocatable is None:
        note = f"{ALLOCATABLE_NOT_SERVED}: {answer.no_allocatable}"
        return {"cpus": {}, "devices": {}, "memory": [], "served": False, "note": note}
    alloc_cpus = frozenset(allocatable.cpu_ids)
    devices: dict[str, dict[str, Any]] = {}
    for d in allocatable.devices:
        entry = devices.setdefault(d.resource_name, {"count": 0, "numa": []})
        entry["count"] += len(d.device_ids)
        entry["numa"] = sorted(set(entry["numa"]) | set(_numa_ids(d.topology)))
    return {
        "cpus": {str(n): format_cpulist(alloc_cpus & cpus) for n, cpus in sorted(node_cpus.items())},
        "devices": dict(sorted(devices.items())),
        "memory": _memory(allocatable.memory),
        "served": True,
        "note": None,
    }


def build_report(
    answer: PodResources,
    node_cpus: Mapping[int, frozenset[int]],
    cpu_state: Mapping[str, Any],
    memory_state: Mapping[str, Any] | None,
    uids: Mapping[tuple[str, str], str],
    state_dir: str = str(DEFAULT_STATE_DIR),
) -> dict[str, Any]:
    """The JSON-ready report: node summary, then every pod and container with its placement.

    memory_state is None when the kubelet wrote no memory_manager_state; with it or with policy None,
    memory affinity is reported as MEMORY_NOT_MANAGED (node and containers alike).
    """
    unmanaged = memory_unmanaged(memory_state, f"{state_dir}/{MEMORY_STATE}")
    shared = cpu_state.get("defaultCpuSet", "")
    try:
        shared_cpus = format_cpulist(parse_cpulist(shared))
    except CpulistError as exc:
        raise InspectError(f"{state_dir}/{CPU_STATE}: defaultCpuSet: {exc}") from None
    pods = []
    for pod in sorted(answer.listed.pod_resources, key=lambda p: (p.namespace, p.name)):
        uid = uids.get((pod.namespace, pod.name))
        rows = []
        for c in pod.containers:
            all_devices = _devices(c.devices)
            memory = _memory(c.memory)
            rows.append({
                "name": c.name,
                "exclusive_cpus": format_cpulist(c.cpu_ids),
                "cpu_numa": _cpu_numa(c.cpu_ids, node_cpus),
                "memory": memory,
                "memory_numa": [] if unmanaged else sorted({n for block in memory for n in block["numa"]}),
                "memory_affinity": MEMORY_NOT_MANAGED if unmanaged else "managed",
                "numa_align": [d for d in all_devices if d["resource"].startswith(NUMA_ALIGN_PREFIX)],
                "devices": [d for d in all_devices if not d["resource"].startswith(NUMA_ALIGN_PREFIX)],
                "state": _state_view(uid, c.name, cpu_state, memory_state, state_dir),
            })
        pods.append({"namespace": pod.namespace, "name": pod.name, "uid": uid, "containers": rows})
    return {
        "numa_nodes": {str(n): format_cpulist(cpus) for n, cpus in sorted(node_cpus.items())},
        "memory_only_nodes": sorted(n for n, cpus in node_cpus.items() if not cpus),
        "cpu_manager": {"policy": cpu_state.get("policyName"), "shared_cpus": shared_cpus},
        "memory_manager": {
            "policy": None if memory_state is None else memory_state.get("policyName"),
            "managed": not unmanaged,
            "note": f"memory affinity {MEMORY_NOT_MANAGED}: {unmanaged}" if unmanaged else None,
        },
        "allocatable": _allocatable(answer, node_cpus),
        "pods": pods,
    }


def _nodes(ids: Sequence[int]) -> str:
    return format_cpulist(ids) or "-"


def _agreement(container: Mapping[str, Any], memory_managed: bool) -> str:
    """STATE column: do the managers' checkpoints say what PodResources says?"""
    state = container["state"]
    if state is None:
        return "uid?"
    same_cpus = (state["cpus"] or "") == container["exclusive_cpus"]
    same_mems = not memory_managed or not container["memory_numa"] or state["memory_numa"] == container["memory_numa"]
    if same_cpus and same_mems:
        return "ok"
    mems = f" mems {_nodes(state['memory_numa'])}" if memory_managed else ""
    return f"differs: cpus {state['cpus'] or '-'}{mems}"


def format_table(report: Mapping[str, Any]) -> str:
    """A human table: one header block for the node, one row per container.

    Reports from an older numa-align (read over SSH by `numalab inspect`) lack `managed`, `served` and
    `memory_affinity`; they are read as managed and served, which is all such a version could report.
    """
    memory = report["memory_manager"]
    lines = [
        f"cpu manager {report['cpu_manager']['policy']}, shared pool {report['cpu_manager']['shared_cpus'] or '-'}; "
        + (f"memory manager {memory['policy']}" if memory.get("managed", True) else memory["note"]),
    ]
    allocatable = report["allocatable"]
    served = allocatable.get("served", True)
    for node, cpus in report["numa_nodes"].items():
        if not cpus:
            lines.append(f"numa {node}: memory-only (no online CPU, so no numa-align device)")
            continue
        if not served:
            lines.append(f"numa {node}: cpus {cpus}")
            continue
        alloc = allocatable["cpus"].get(node) or "-"
        devs = ", ".join(f"{name} x{d['count']}" for name, d in allocatable["devices"].items()
                         if int(node) in d["numa"]) or "-"
        lines.append(f"numa {node}: cpus {cpus}, allocatable cpus {alloc}, devices {devs}")
    if not served:
        lines.append(f"allocatable {allocatable['note']}")
    header = ("POD", "CONTAINER", "CPUS", "CPU-NUMA", "MEM-NUMA", "NUMA-ALIGN", "STATE")
    rows = [header]
    for pod in report["pods"]:
        for c in pod["containers"]:
            aligned = ",".join(f"{d['resource'].removeprefix(NUMA_ALIGN_PREFIX)}x{len(d['ids'])}"
                               for d in c["numa_align"]) or "-"
            managed = c.get("memory_affinity") != MEMORY_NOT_MANAGED
            mems = _nodes(c["memory_numa"]) if managed else "unmanaged"
            rows.append((f"{pod['namespace']}/{pod['name']}", c["name"], c["exclusive_cpus"] or "-",
                         _nodes(c["cpu_numa"]), mems, aligned, _agreement(c, managed)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines.append("")
    lines.extend("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)


# --- CLI ------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numa-align inspect",
        description="Per pod and container: NUMA nodes of exclusive CPUs, memory affinity, numa-align devices.",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--socket", type=Path, default=DEFAULT_SOCKET,
                        help=f"the kubelet's pod-resources socket (default {DEFAULT_SOCKET})")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                        help=f"where {CPU_STATE} and {MEMORY_STATE} are (default {DEFAULT_STATE_DIR})")
    parser.add_argument("--pod-log-dir", type=Path, default=DEFAULT_POD_LOG_DIR,
                        help=f"the kubelet's pod log root, for pod UIDs (default {DEFAULT_POD_LOG_DIR})")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"),
                        help="where sysfs is mounted (default /sys)")
    return parser


def inspect_node(args: argparse.Namespace) -> dict[str, Any]:
    try:
        node_cpus = {node.id: node.cpus for node in read_sysfs(args.sysfs_root).nodes}
    except SysfsError as exc:
        raise InspectError(str(exc)) from None
    cpu_state = read_checkpoint(args.state_dir / CPU_STATE)
    memory_state = read_optional_checkpoint(args.state_dir / MEMORY_STATE)
    uids = pod_uids(args.pod_log_dir)
    answer = query_pod_resources(args.socket)
    return build_report(answer, node_cpus, cpu_state, memory_state, uids, str(args.state_dir))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = inspect_node(args)
    except InspectError as exc:
        print(f"numa-align inspect: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(json.dumps(report, indent=2) if args.format == "json" else format_table(report))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
