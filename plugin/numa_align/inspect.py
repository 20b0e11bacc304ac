"""`numa-align inspect`: where each pod's containers really sit, as the kubelet on this node sees it.

Sources, all local to the node: the kubelet PodResources API v1 (List and GetAllocatableResources on the
pod-resources unix socket) for exclusive CPUs, memory and devices per container; the CPU and Memory
Manager checkpoint files for the policies, the shared pool and the managers' own view of each container;
sysfs to map CPUs to NUMA nodes. /var/log/pods/<namespace>_<name>_<uid> gives the pod UIDs that key the
checkpoint files (PodResources reports pods by name only).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.api import podresources_v1_pb2_grpc as pb_grpc
from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist
from numa_align.sysfs import SysfsError, read_mounted_nodes

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
DEFAULT_STATE_DIR = Path("/var/lib/kubelet")
DEFAULT_POD_LOG_DIR = Path("/var/log/pods")
CPU_STATE = "cpu_manager_state"
MEMORY_STATE = "memory_manager_state"
NUMA_ALIGN_PREFIX = "numa-align/"
RPC_TIMEOUT = 10.0
"""Seconds to wait for each PodResources call; the kubelet answers from memory, so this is generous."""

EXIT_OK = 0
EXIT_UNAVAILABLE = 1


class InspectError(RuntimeError):
    """A source the inspector needs is missing or unreadable; the message names it and what to check."""


# --- sources ----------------------------------------------------------------------------------------


def query_pod_resources(
    socket: Path, timeout: float = RPC_TIMEOUT
) -> tuple[pb.ListPodResourcesResponse, pb.AllocatableResourcesResponse]:
    """List and GetAllocatableResources from the kubelet's pod-resources socket."""
    if not socket.exists():
        raise InspectError(f"no socket at {socket}: is the kubelet running on this node?")
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = pb_grpc.PodResourcesListerStub(channel)
        try:
            listed = stub.List(pb.ListPodResourcesRequest(), timeout=timeout)
            allocatable = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            raise InspectError(
                f"PodResources API at {socket}: {exc.code().name}: {exc.details()}"
            ) from None
    return listed, allocatable


def read_checkpoint(path: Path) -> dict[str, Any]:
    """A kubelet checkpoint file (JSON with policyName and entries)."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InspectError(f"cannot read {path}: {exc.strerror} (the kubelet writes it at start)") from None
    except json.JSONDecodeError as exc:
        raise InspectError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or "policyName" not in data:
        raise InspectError(f"{path} has no policyName: not a kubelet checkpoint")
    return data


def pod_uids(log_dir: Path) -> dict[tuple[str, str], str]:
    """{(namespace, name): uid} from the kubelet's per-pod log directories `<ns>_<name>_<uid>`.

    Names and namespaces are DNS labels/subdomains and never hold "_", so the split is unambiguous.
    """
    if not log_dir.is_dir():
        raise InspectError(f"{log_dir} is not a directory (the kubelet keeps one log directory per pod there)")
    uids: dict[tuple[str, str], str] = {}
    for entry in log_dir.iterdir():
        parts = entry.name.split("_")
        if entry.is_dir() and len(parts) == 3:
            uids[(parts[0], parts[1])] = parts[2]
    return uids


# --- the report ---------------------------------------------------------------------------------


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
                memory_state: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The managers' own record of a container, or None when the pod's UID is unknown."""
    if uid is None:
        return None
    cpuset = (cpu_state.get("entries") or {}).get(uid, {}).get(name)
    blocks = (memory_state.get("entries") or {}).get(uid, {}).get(name) or []
    try:
        cpus = None if cpuset is None else format_cpulist(parse_cpulist(cpuset))
    except CpulistError as exc:
        raise InspectError(f"{where}: {CPU_STATE} entry for {uid}/{name}: {exc}") from None
    affinity = sorted({int(n) for block in blocks for n in block.get("numaAffinity") or []})
    return {"cpus": cpus, "memory_numa": affinity}


def build_report(
    listed: pb.ListPodResourcesResponse,
    allocatable: pb.AllocatableResourcesResponse,
    node_cpus: Mapping[int, frozenset[int]],
    cpu_state: Mapping[str, Any],
    memory_state: Mapping[str, Any],
    uids: Mapping[tuple[str, str], str],
    state_dir: str = str(DEFAULT_STATE_DIR),
) -> dict[str, Any]:
    """The JSON-ready report: node summary, then every pod and container with its placement."""
    alloc_cpus = frozenset(allocatable.cpu_ids)
    devices: dict[str, dict[str, Any]] = {}
    for d in allocatable.devices:
        entry = devices.setdefault(d.resource_name, {"count": 0, "numa": []})
        entry["count"] += len(d.device_ids)
        entry["numa"] = sorted(set(entry["numa"]) | set(_numa_ids(d.topology)))
    shared = cpu_state.get("defaultCpuSet", "")
    try:
        shared_cpus = format_cpulist(parse_cpulist(shared))
    except CpulistError as exc:
        raise InspectError(f"{state_dir}/{CPU_STATE}: defaultCpuSet: {exc}") from None
    pods = []
    for pod in sorted(listed.pod_resources, key=lambda p: (p.namespace, p.name)):
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
                "memory_numa": sorted({n for block in memory for n in block["numa"]}),
                "numa_align": [d for d in all_devices if d["resource"].startswith(NUMA_ALIGN_PREFIX)],
                "devices": [d for d in all_devices if not d["resource"].startswith(NUMA_ALIGN_PREFIX)],
                "state": _state_view(uid, c.name, cpu_state, memory_state, state_dir),
            })
        pods.append({"namespace": pod.namespace, "name": pod.name, "uid": uid, "containers": rows})
    return {
        "numa_nodes": {str(n): format_cpulist(cpus) for n, cpus in sorted(node_cpus.items())},
        "cpu_manager": {"policy": cpu_state.get("policyName"), "shared_cpus": shared_cpus},
        "memory_manager": {"policy": memory_state.get("policyName")},
        "allocatable": {
            "cpus": {str(n): format_cpulist(alloc_cpus & cpus) for n, cpus in sorted(node_cpus.items())},
            "devices": dict(sorted(devices.items())),
            "memory": _memory(allocatable.memory),
        },
        "pods": pods,
    }


def _nodes(ids: Sequence[int]) -> str:
    return format_cpulist(ids) or "-"


def format_table(report: Mapping[str, Any]) -> str:
    """A human table: one header block for the node, one row per container."""
    lines = [
        f"cpu manager {report['cpu_manager']['policy']}, shared pool {report['cpu_manager']['shared_cpus'] or '-'}; "
        f"memory manager {report['memory_manager']['policy']}",
    ]
    for node, cpus in report["numa_nodes"].items():
        alloc = report["allocatable"]["cpus"].get(node) or "-"
        devs = ", ".join(f"{name} x{d['count']}" for name, d in report["allocatable"]["devices"].items()
                         if int(node) in d["numa"]) or "-"
        lines.append(f"numa {node}: cpus {cpus}, allocatable cpus {alloc}, devices {devs}")
    header = ("POD", "CONTAINER", "CPUS", "CPU-NUMA", "MEM-NUMA", "NUMA-ALIGN", "STATE")
    rows = [header]
    for pod in report["pods"]:
        for c in pod["containers"]:
            aligned = ",".join(f"{d['resource'].removeprefix(NUMA_ALIGN_PREFIX)}x{len(d['ids'])}"
                               for d in c["numa_align"]) or "-"
            state = c["state"]
            if state is None:
                agree = "uid?"
            else:
                same_cpus = (state["cpus"] or "") == c["exclusive_cpus"]
                same_mems = not c["memory_numa"] or state["memory_numa"] == c["memory_numa"]
                agree = "ok" if same_cpus and same_mems else f"differs: cpus {state['cpus'] or '-'} " \
                                                             f"mems {_nodes(state['memory_numa'])}"
            rows.append((f"{pod['namespace']}/{pod['name']}", c["name"], c["exclusive_cpus"] or "-",
                         _nodes(c["cpu_numa"]), _nodes(c["memory_numa"]), aligned, agree))
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
        node_cpus = {node.id: node.cpus for node in read_mounted_nodes(args.sysfs_root)}
    except SysfsError as exc:
        raise InspectError(str(exc)) from None
    cpu_state = read_checkpoint(args.state_dir / CPU_STATE)
    memory_state = read_checkpoint(args.state_dir / MEMORY_STATE)
    uids = pod_uids(args.pod_log_dir)
    listed, allocatable = query_pod_resources(args.socket)
    return build_report(listed, allocatable, node_cpus, cpu_state, memory_state, uids, str(args.state_dir))


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
