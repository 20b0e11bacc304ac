"""What the placement probe printed: its /proc/self/status lines, NUMA_NODE and every node's cpulist.

The probe (e2e/probe.sh) reads placement from inside the container, the way Kubernetes' node e2e tests do;
the e2e suite reads its output from pod logs and the lab tests from a process in a cgroup cpuset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from numa_align.cpulist import CpulistError, parse_cpulist

PROBE_BEGIN = "numa-probe begin"
PROBE_END = "numa-probe end"

_NODE_LINE = re.compile(r"^node(\d+) cpulist:\s*(.*)$")
_STATUS_LINE = re.compile(r"^([A-Za-z_()]+):\s*(.*)$")


class ProbeOutputError(ValueError):
    """Probe output that is cut short or not the probe's: names the line or field that is wrong."""


def parse_status(text: str) -> dict[str, str]:
    """`/proc/<pid>/status` lines ("Cpus_allowed_list:\\t0-3") as {key: value}; other lines are ignored."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _STATUS_LINE.match(line.strip())
        if match:
            fields[match.group(1)] = match.group(2).strip()
    return fields


@dataclass(frozen=True)
class ProbeReport:
    """Placement as seen from inside one process: allowed cpus and memory nodes, NUMA_NODE, node cpus.

    numa_node is None when NUMA_NODE was not set in the container's environment.
    """

    cpus: frozenset[int]
    mems: frozenset[int]
    numa_node: int | None
    node_cpus: Mapping[int, frozenset[int]]

    @property
    def all_cpus(self) -> frozenset[int]:
        return frozenset().union(*self.node_cpus.values())

    def nodes_of_cpus(self) -> frozenset[int]:
        """NUMA nodes that hold at least one of the allowed cpus."""
        return frozenset(node for node, cpus in self.node_cpus.items() if cpus & self.cpus)


def parse_probe_output(text: str) -> ProbeReport:
    """Parse the block between PROBE_BEGIN and PROBE_END (the last complete one, if logs repeat)."""
    lines = [line.rstrip("\r") for line in text.splitlines()]
    ends = [i for i, line in enumerate(lines) if line.strip() == PROBE_END]
    if not ends:
        raise ProbeOutputError(f"no {PROBE_END!r} line: the probe did not finish (got {len(lines)} lines)")
    end = ends[-1]
    begins = [i for i, line in enumerate(lines[:end]) if line.strip() == PROBE_BEGIN]
    if not begins:
        raise ProbeOutputError(f"no {PROBE_BEGIN!r} line before {PROBE_END!r}")
    block = lines[begins[-1] + 1 : end]
    status = parse_status("\n".join(block))
    cpus = _cpulist_field(status, "Cpus_allowed_list")
    mems = _cpulist_field(status, "Mems_allowed_list")
    numa_node: int | None = None
    node_cpus: dict[int, frozenset[int]] = {}
    for line in block:
        line = line.strip()
        if line.startswith("NUMA_NODE="):
            value = line.removeprefix("NUMA_NODE=")
            if not value.isdigit():
                raise ProbeOutputError(f"NUMA_NODE: {value!r} is not a node id")
            numa_node = int(value)
        elif node := _NODE_LINE.match(line):
            try:
                node_cpus[int(node.group(1))] = parse_cpulist(node.group(2))
            except CpulistError as exc:
                raise ProbeOutputError(f"node{node.group(1)} cpulist: {exc}") from None
    if not node_cpus:
        raise ProbeOutputError("no 'nodeN cpulist:' lines: /sys/devices/system/node was not readable")
    return ProbeReport(cpus, mems, numa_node, node_cpus)


def _cpulist_field(status: Mapping[str, str], key: str) -> frozenset[int]:
    if key not in status:
        raise ProbeOutputError(f"no {key} line in the probe output")
    try:
        return parse_cpulist(status[key])
    except CpulistError as exc:
        raise ProbeOutputError(f"{key}: {exc}") from None
