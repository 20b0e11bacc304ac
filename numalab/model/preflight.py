"""What `numalab preflight` says of a host: its shape (cgroup, swap, SMT, offline CPUs, memory-only nodes,
hugepages per node), the kubelet version and the policy numa-lab would write, or why it would refuse the host.

Pure: the facts come from a local sysfs (`numalab preflight --sysfs-root`) or from pyinfra facts (the
deploy's preflight stage), and both end here, so the CLI and the deploy judge a host the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletSettings, kubelet_policy
from numalab.model.quantity import format_bytes
from numalab.model.topology import Topology


@dataclass(frozen=True)
class HostFacts:
    """What preflight needs of a host. topology_error: why its sysfs could not be read (then topology is None)."""

    name: str
    topology: Topology | None
    kubelet_version: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    cgroup_version: int | None = None
    swap_active: bool = False
    allow_newer: bool = False
    topology_error: str | None = None


@dataclass(frozen=True)
class HostReport:
    name: str
    cgroup_version: int | None
    swap_active: bool
    kubelet_version: str
    shape: Mapping[str, Any]
    kubelet_args: tuple[str, ...] | None
    refused: str | None

    @property
    def ok(self) -> bool:
        return self.refused is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.name,
            "ok": self.ok,
            "cgroup_version": self.cgroup_version,
            "swap_active": self.swap_active,
            "kubelet_version": self.kubelet_version,
            **self.shape,
            "kubelet_args": list(self.kubelet_args) if self.kubelet_args is not None else None,
            "refused": self.refused,
        }


def shape_of(topology: Topology) -> dict[str, Any]:
    """The parts of a shape that decide the policy, in the words of the report."""
    return {
        "numa_nodes": list(topology.ids),
        "threads_per_core": topology.threads_per_core,
        "offline_cpus": format_cpulist(topology.offline_cpus),
        "memory_only_nodes": [cell.id for cell in topology.memory_only_cells],
        "hugepages": {
            str(cell.id): {size: count for size, count in sorted(cell.hugepages.items()) if count}
            for cell in topology.cells if any(cell.hugepages.values())
        },
        "memory": {str(cell.id): format_bytes(cell.memory) for cell in topology.cells},
    }


def preflight(facts: HostFacts) -> HostReport:
    """Judge one host; every refusal names the host and the field, as the deploy's error would."""
    shape = shape_of(facts.topology) if facts.topology is not None else {}
    args: tuple[str, ...] | None = None
    refused: str | None = facts.topology_error
    if refused is None and facts.topology is not None:
        try:
            settings = KubeletSettings.from_dict(
                {**facts.settings, "kubelet-version": facts.kubelet_version}, where="kubelet_settings"
            )
            policy = kubelet_policy(facts.topology, settings, allow_newer=facts.allow_newer,
                                    cgroup_version=facts.cgroup_version)
            args = policy.args
        except ValidationError as exc:
            refused = str(exc)
    if refused is not None:
        refused = f"{facts.name}: {refused}"
    return HostReport(facts.name, facts.cgroup_version, facts.swap_active, facts.kubelet_version, shape, args,
                      refused)


def format_reports(reports: Sequence[HostReport]) -> str:
    """A block per host: its shape in one line, then the kubelet args or the reason it is refused."""
    lines: list[str] = []
    for report in reports:
        shape = report.shape
        memory_only = ",".join(map(str, shape.get("memory_only_nodes", []))) or "-"
        pages = "; ".join(f"node{n} " + ",".join(f"{s}x{c}" for s, c in sizes.items())
                          for n, sizes in shape.get("hugepages", {}).items()) or "-"
        lines.append(
            f"{report.name}: {'ok' if report.ok else 'REFUSED'}  kubelet {report.kubelet_version}  "
            f"cgroup v{report.cgroup_version or '?'}  swap {'on (base turns it off)' if report.swap_active else 'off'}"
        )
        if shape:
            lines.append(
                f"  nodes {','.join(map(str, shape['numa_nodes']))}  threads/core {shape['threads_per_core']}  "
                f"offline cpus {shape['offline_cpus'] or '-'}  memory-only nodes {memory_only}  hugepages {pages}"
            )
        if report.kubelet_args is not None:
            lines.extend(f"  --{arg}" for arg in report.kubelet_args)
        else:
            lines.append(f"  refused: {report.refused}")
    return "\n".join(lines)
