"""What a pinned container should see, and whether it saw it.

Pure functions shared by the e2e suite (which reads a probe's output from pod logs), the lint (which
applies the same QoS rules to manifests before they are applied) and the lab tests (which run the probe
inside a cgroup cpuset). The probe prints its own /proc/self/status lines, NUMA_NODE and every node's
cpulist, the way Kubernetes' node e2e tests read placement from inside the container.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist

from numalab.model.errors import ValidationError
from numalab.model.quantity import parse_bytes, parse_cpu_millis

PROBE_BEGIN = "numa-probe begin"
PROBE_END = "numa-probe end"
NUMA_ALIGN_PREFIX = "numa-align/numa-"
QOS_RESOURCES = ("cpu", "memory")

_NODE_LINE = re.compile(r"^node(\d+) cpulist:\s*(.*)$")
_STATUS_LINE = re.compile(r"^([A-Za-z_()]+):\s*(.*)$")
_NUMA_ALIGN = re.compile(r"^numa-align/numa-(\d+)$")


class ProbeOutputError(ValueError):
    """Probe output that is cut short or not the probe's: names the line or field that is wrong."""


# --- what the probe printed ---------------------------------------------------------------------


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


# --- expected vs seen ----------------------------------------------------------------------------


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


# --- QoS and pinning rules over pod specs (manifest dicts, camelCase keys) ---------------------


def numa_align_node(resource: str) -> int | None:
    """N of "numa-align/numa-N", None for any other resource name."""
    match = _NUMA_ALIGN.match(resource)
    return int(match.group(1)) if match else None


def numa_align_resource(node: int) -> str:
    return f"{NUMA_ALIGN_PREFIX}{node}"


@dataclass(frozen=True)
class ContainerRef:
    """A container of a pod spec with the field path that reaches it (e.g. spec.initContainers[0])."""

    kind: str  # "init", "sidecar" (init with restartPolicy Always) or "app"
    index: int
    path: str
    spec: Mapping[str, Any] = field(repr=False)

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or f"#{self.index}")


def containers(pod_spec: Mapping[str, Any], path: str = "spec") -> list[ContainerRef]:
    """Init containers (sidecars marked as such) in order, then app containers."""
    found: list[ContainerRef] = []
    for key, kind in (("initContainers", "init"), ("containers", "app")):
        items = pod_spec.get(key) or []
        if not isinstance(items, list):
            got = type(items).__name__
            raise ValidationError(f"{path}.{key}", f"expected a list of containers, got {got}")
        for index, spec in enumerate(items):
            where = f"{path}.{key}[{index}]"
            if not isinstance(spec, Mapping):
                raise ValidationError(where, f"expected a container mapping, got {type(spec).__name__}")
            this_kind = "sidecar" if kind == "init" and spec.get("restartPolicy") == "Always" else kind
            found.append(ContainerRef(this_kind, index, where, spec))
    return found


def resource_map(container: ContainerRef, section: str) -> dict[str, Any]:
    """resources.requests or resources.limits as a dict (empty when absent)."""
    resources = container.spec.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise ValidationError(f"{container.path}.resources", "expected a mapping")
    values = resources.get(section) or {}
    if not isinstance(values, Mapping):
        raise ValidationError(f"{container.path}.resources.{section}", "expected a mapping")
    return {str(k): v for k, v in values.items()}


def _amount(resource: str, value: Any, where: str) -> int:
    if resource == "cpu":
        return parse_cpu_millis(value, where)
    if resource == "memory":
        return parse_bytes(value, where)
    return _count(value, where)


def _count(value: Any, where: str) -> int:
    millis = parse_cpu_millis(value, where)
    if millis % 1000:
        raise ValidationError(where, f"{value!r} is not a whole count (extended resources are integers)")
    return millis // 1000


def effective_requests(container: ContainerRef) -> dict[str, int]:
    """Requests after the API server's defaulting (a missing request takes its limit), parsed:
    cpu in millicores, memory in bytes, anything else as a count."""
    requests = resource_map(container, "requests")
    limits = resource_map(container, "limits")
    merged = {**{k: v for k, v in limits.items()}, **requests}
    base = f"{container.path}.resources"
    return {
        name: _amount(name, value, f"{base}.{'requests' if name in requests else 'limits'}.{name}")
        for name, value in merged.items()
    }


def parsed_limits(container: ContainerRef) -> dict[str, int]:
    limits = resource_map(container, "limits")
    base = f"{container.path}.resources.limits"
    return {name: _amount(name, value, f"{base}.{name}") for name, value in limits.items()}


def guaranteed_problems(container: ContainerRef) -> list[tuple[str, str]]:
    """Why this container keeps its pod from being Guaranteed: [(field path, reason)], empty if it
    does not. Kubernetes requires cpu and memory limits on every container, with requests equal."""
    requests = effective_requests(container)
    limits = parsed_limits(container)
    base = f"{container.path}.resources"
    problems: list[tuple[str, str]] = []
    for resource in QOS_RESOURCES:
        if resource not in limits:
            problems.append((f"{base}.limits.{resource}", f"no {resource} limit"))
        elif requests[resource] != limits[resource]:
            problems.append((f"{base}.requests.{resource}", f"{resource} request differs from its limit"))
    return problems


def qos_class(pod_spec: Mapping[str, Any], path: str = "spec") -> str:
    """Guaranteed, Burstable or BestEffort, by the rules the API server applies to status.qosClass."""
    refs = containers(pod_spec, path)
    if all(not guaranteed_problems(ref) for ref in refs) and refs:
        return "Guaranteed"
    for ref in refs:
        amounts = {**effective_requests(ref), **parsed_limits(ref)}
        if any(amounts.get(resource) for resource in QOS_RESOURCES):
            return "Burstable"
    return "BestEffort"


def exclusive_cpus(pod_spec: Mapping[str, Any], container: ContainerRef, path: str = "spec") -> int:
    """Exclusive cpus the static CPU Manager gives this container: its cpu count when the pod is
    Guaranteed and the request is whole cores, else 0 (it runs in the shared pool)."""
    if qos_class(pod_spec, path) != "Guaranteed":
        return 0
    millis = effective_requests(container).get("cpu", 0)
    return millis // 1000 if millis % 1000 == 0 else 0


def numa_align_requests(container: ContainerRef) -> dict[int, int]:
    """{node: count} of the numa-align resources this container gets (limits, the binding ones)."""
    found: dict[int, int] = {}
    for name, value in resource_map(container, "limits").items():
        node = numa_align_node(name)
        if node is not None:
            found[node] = _count(value, f"{container.path}.resources.limits.{name}")
    return found


# --- cluster-side decisions (over API objects as plain dicts) ----------------------------------

TOPOLOGY_AFFINITY_ERROR = re.compile(r"Topology.*Affinity.*Error")


def numa_align_allocatable(allocatable: Mapping[str, Any]) -> dict[int, int]:
    """{node: count} of numa-align/numa-N in a Node's status.allocatable; zero counts included."""
    found: dict[int, int] = {}
    for name, value in allocatable.items():
        node = numa_align_node(name)
        if node is not None:
            found[node] = _count(value, f"status.allocatable.{name}")
    return found


def kubelet_policies(configz: Mapping[str, Any]) -> dict[str, str]:
    """The manager policies from a kubelet's /configz answer ({"kubeletconfig": {...}}), with the
    kubelet's defaults for fields it leaves out."""
    config = configz.get("kubeletconfig")
    if not isinstance(config, Mapping):
        raise ValidationError("configz.kubeletconfig", "missing: not a kubelet /configz answer")
    return {
        "cpuManagerPolicy": str(config.get("cpuManagerPolicy") or "none"),
        "memoryManagerPolicy": str(config.get("memoryManagerPolicy") or "None"),
        "topologyManagerPolicy": str(config.get("topologyManagerPolicy") or "none"),
        "topologyManagerScope": str(config.get("topologyManagerScope") or "container"),
    }


def judge_exhaustion(pod: Mapping[str, Any], capacity_mode: str, resource: str) -> tuple[bool | None, str]:
    """Outcome of a pod that needs more CPUs than its NUMA node has free.

    Slot mode: the kubelet must reject it at admission (phase Failed, reason TopologyAffinityError).
    cpus mode: there are too few `resource` (numa-align/numa-N) devices, so the scheduler must leave it
    Pending (PodScheduled False, reason Unschedulable, naming the resource). Returns (True, why) when
    it behaved, (False, why) when it did something else for good, and (None, state) while the outcome
    is not known yet.
    """
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    said = " ".join(str(status.get(key) or "") for key in ("reason", "message")).strip()
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    unschedulable = scheduled is not None and scheduled.get("status") == "False" \
        and scheduled.get("reason") == "Unschedulable"
    if phase in ("Running", "Succeeded"):
        return False, f"admitted and {phase}: the node had room after all"
    if capacity_mode == "cpus":
        if unschedulable:
            message = str(scheduled.get("message", ""))
            if f"Insufficient {resource}" not in message:
                return False, f"Unschedulable, but not for lack of {resource}: {message}"
            return True, f"Pending, Unschedulable: {message}"
        if phase == "Failed":
            return False, f"Failed ({said}); expected to stay Pending unschedulable"
        return None, f"{phase}, not yet judged unschedulable"
    if phase == "Failed":
        if TOPOLOGY_AFFINITY_ERROR.search(said):
            return True, f"rejected: {said}"
        return False, f"Failed for another reason: {said or 'none given'}"
    if unschedulable:
        return False, f"Unschedulable ({scheduled.get('message', '')}); expected the kubelet to reject it"
    return None, f"{phase}, not yet rejected"


def ready_since(node: Mapping[str, Any], since_epoch: float) -> bool:
    """True when the Node's Ready condition is True and was last posted at or after `since_epoch`
    (seconds, on the node's clock): the kubelet has reported since it was restarted."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") != "Ready":
            continue
        beat = condition.get("lastHeartbeatTime")
        if condition.get("status") != "True" or not beat:
            return False
        return datetime.fromisoformat(str(beat).replace("Z", "+00:00")).timestamp() >= since_epoch
    return False
