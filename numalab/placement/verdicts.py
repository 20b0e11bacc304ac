"""Expected vs seen: whether the placement a probe reported is what the kubelet owed the container."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from numa_align.cpulist import format_cpulist

from numalab.placement.probe import ProbeReport


@dataclass(frozen=True)
class Verdict:
    """The judgement of one container: ok, the reasons it is not, and what was seen (for the table)."""

    problems: tuple[str, ...]
    cpus: str
    mems: str

    @property
    def ok(self) -> bool:
        return not self.problems


def _verdict(report: ProbeReport, problems: Iterable[str]) -> Verdict:
    return Verdict(tuple(problems), format_cpulist(report.cpus), format_cpulist(report.mems))


def judge_pinned(report: ProbeReport, node: int, count: int, memory_static: bool) -> Verdict:
    """A container that asked for numa-align/numa-<node> and `count` exclusive cpus.

    Its cpus must be exactly `count` cpus of that node; its memory nodes exactly {node} when the
    Memory Manager is Static (otherwise the cpuset's mems are the kubelet's default and not judged);
    and NUMA_NODE, set by the plugin's Allocate, must name the node.
    """
    problems: list[str] = []
    if node not in report.node_cpus:
        return _verdict(report, [f"node {node} is not in the container's view of NUMA nodes "
                                 f"({format_cpulist(report.node_cpus)})"])
    wanted = report.node_cpus[node]
    if not report.cpus <= wanted:
        outside = format_cpulist(report.cpus - wanted)
        problems.append(f"cpus {format_cpulist(report.cpus)} are not all on node {node} "
                        f"({format_cpulist(wanted)}): {outside} outside")
    if len(report.cpus) != count:
        problems.append(f"{len(report.cpus)} cpus allowed, expected exactly {count} exclusive")
    if memory_static and report.mems != {node}:
        problems.append(f"mems {format_cpulist(report.mems)}, expected {node} (Memory Manager Static)")
    if report.numa_node != node:
        seen = "unset" if report.numa_node is None else str(report.numa_node)
        problems.append(f"NUMA_NODE is {seen}, expected {node}")
    return _verdict(report, problems)


def memory_not_enforced(memory_policy: str) -> str:
    """What a row says when the kubelet does not narrow cpuset.mems ('' under the Static Memory Manager):
    mems are then reported, never judged, and never passed off as pinned."""
    if memory_policy == "Static":
        return ""
    return f"mems not enforced by this kubelet (memoryManagerPolicy {memory_policy})"


def judge_exclusive(report: ProbeReport, count: int, disjoint_from: frozenset[int] = frozenset()) -> Verdict:
    """A Guaranteed container with integer cpus but no numa-align: `count` cpus on one node, none shared
    with `disjoint_from` (the exclusive cpus of its neighbours)."""
    problems: list[str] = []
    if len(report.cpus) != count:
        problems.append(f"{len(report.cpus)} cpus allowed, expected exactly {count} exclusive")
    if len(report.nodes_of_cpus()) > 1:
        spanned = format_cpulist(report.nodes_of_cpus())
        problems.append(f"cpus {format_cpulist(report.cpus)} span nodes {spanned}")
    if report.cpus & disjoint_from:
        problems.append(f"cpus {format_cpulist(report.cpus & disjoint_from)} are also another container's")
    return _verdict(report, problems)


def judge_shared(report: ProbeReport, shared_pool: frozenset[int]) -> Verdict:
    """A container that is not pinned: its cpus are the whole shared pool, and its memory nodes are
    every node the container can see."""
    problems: list[str] = []
    if report.cpus != shared_pool:
        problems.append(f"cpus {format_cpulist(report.cpus)}, expected the shared pool "
                        f"{format_cpulist(shared_pool)}")
    all_nodes = frozenset(report.node_cpus)
    if report.mems != all_nodes:
        problems.append(f"mems {format_cpulist(report.mems)}, expected every node "
                        f"{format_cpulist(all_nodes)}")
    return _verdict(report, problems)
