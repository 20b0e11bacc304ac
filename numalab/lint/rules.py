"""The reasons a workload that asks for numa-align will not be pinned, one function per reason.

Rules look only at pods that request a `numa-align/numa-N` resource: those are the ones meant to be
pinned. Each finding names the object, the container and the field path to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Literal, cast

from numa_align.cpulist import format_cpulist
from numa_align.devices import node_of_resource

from numalab.lint.workloads import Workload
from numalab.model.kubelet_settings import KubeletSettings
from numalab.model.quantity import format_millis, parse_cpu_millis
from numalab.placement.pod_specs import (
    ContainerRef,
    containers,
    effective_requests,
    guaranteed_problems,
    numa_align_requests,
    resource_map,
)

CapacityMode = Literal["slots", "cpus"]
Scope = Literal["container", "pod"]
DEFAULT_SCOPE = cast(Scope, KubeletSettings().topology_manager_scope)
"""The scope numa-lab's deploy writes unless told otherwise, so lint judges what will run."""


@dataclass(frozen=True)
class LintSettings:
    """capacity_mode: the plugin's NUMA_CAPACITY ("cpus", or "slots" for a device count);
    scope: the kubelet's topologyManagerScope; worker_nodes: NUMA node ids per worker, None if unknown;
    schedulers: the scheduler names that run."""

    capacity_mode: CapacityMode = "slots"
    scope: Scope = DEFAULT_SCOPE
    worker_nodes: Mapping[str, frozenset[int]] | None = None
    schedulers: frozenset[str] | None = None
    """The schedulerNames the cluster runs (default-scheduler included), None if unknown."""


@dataclass(frozen=True)
class Finding:
    rule: str
    source: str
    document: int
    line: int  # of the field, or of the deepest part of its path that the manifest has
    object: str
    container: str
    field: str
    message: str

    def text(self) -> str:
        return (f"{self.source}:{self.line}: {self.object} container {self.container}: "
                f"{self.field}: {self.message} [{self.rule}]")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


Rule = Callable[[Workload, list[ContainerRef], LintSettings], Iterator[tuple[ContainerRef, str, str]]]


def _numa_align_names(ref: ContainerRef) -> dict[str, str]:
    """numa-align resource names of a container, in requests or limits -> the section that holds it."""
    names: dict[str, str] = {}
    for section in ("limits", "requests"):
        for name in resource_map(ref, section):
            if node_of_resource(name) is not None:
                names.setdefault(name, section)
    return names


def not_guaranteed(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """Every container, init and sidecars included, needs cpu and memory limits equal to its requests."""
    for ref in refs:
        for path, reason in guaranteed_problems(ref):
            yield ref, path, f"{reason}: the pod is not Guaranteed, so no container gets exclusive CPUs"


def fractional_cpu(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """The static CPU Manager gives exclusive CPUs only for whole cores."""
    for ref in refs:
        millis = effective_requests(ref).get("cpu")
        if _numa_align_names(ref) and millis is not None and millis % 1000:
            section = "requests" if "cpu" in resource_map(ref, "requests") else "limits"
            yield (ref, f"{ref.path}.resources.{section}.cpu",
                   f"cpu {format_millis(millis)} is not a whole number of cores: the container runs "
                   f"in the shared pool")


def numa_align_limits(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """Extended resources are granted by limits; a request must repeat the limit exactly."""
    for ref in refs:
        requests, limits = resource_map(ref, "requests"), resource_map(ref, "limits")
        for name, value in requests.items():
            if node_of_resource(name) is None:
                continue
            path = f"{ref.path}.resources.requests.{name}"
            if name not in limits:
                yield ref, path, f"{name} is requested but has no limit (the API server rejects this)"
            elif parse_cpu_millis(value, path) != parse_cpu_millis(limits[name], path):
                yield ref, path, f"{name} request {value} differs from its limit {limits[name]}"


def several_nodes(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """What single-numa-node aligns is one NUMA node per scope: the whole pod (init containers too,
    the kubelet sums their requests into one pod hint) with scope pod, each container on its own with
    scope container. Asking one scope for two nodes can never be satisfied."""
    groups = [refs] if settings.scope == "pod" else [[ref] for ref in refs]
    owner = "pod" if settings.scope == "pod" else "container"
    for group in groups:
        first: int | None = None
        for ref in group:
            for name, section in _numa_align_names(ref).items():
                node = node_of_resource(name)
                if first is None:
                    first = node
                elif node != first:
                    yield (ref, f"{ref.path}.resources.{section}.{name}",
                           f"asks for NUMA node {node} while the {owner} already asks for node {first} "
                           f"(topologyManagerScope {settings.scope}: one node per {owner})")


def init_anchor(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """With container scope, the first init container must request the app's numa-align resource too,
    so the CPUs it leaves for reuse are on the app's node."""
    if settings.scope != "container":
        return
    inits = [ref for ref in refs if ref.kind in ("init", "sidecar")]
    if not inits:
        return
    app_names = {name for ref in refs if ref.kind == "app" for name in _numa_align_names(ref)}
    if app_names and not app_names & set(_numa_align_names(inits[0])):
        wanted = ", ".join(sorted(app_names))
        yield (inits[0], f"{inits[0].path}.resources.limits",
               f"app containers request {wanted} but the first init container does not "
               f"(topologyManagerScope container: request it here too, to anchor the pod)")


def capacity_count(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """With NUMA_CAPACITY=cpus one device is one CPU: the count must equal the container's cores."""
    if settings.capacity_mode != "cpus":
        return
    for ref in refs:
        cpu = effective_requests(ref).get("cpu")
        for node, count in numa_align_requests(ref).items():
            if cpu is None or cpu != count * 1000:
                seen = "no cpu" if cpu is None else f"cpu {format_millis(cpu)}"
                yield (ref, f"{ref.path}.resources.limits.numa-align/numa-{node}",
                       f"{count} numa-align devices but {seen} (NUMA_CAPACITY=cpus: one device per CPU)")


def unknown_node(workload: Workload, refs: list[ContainerRef], settings: LintSettings):
    """A node id that no worker has can never be allocated: the pod stays Pending."""
    if settings.worker_nodes is None:
        return
    known = frozenset().union(*settings.worker_nodes.values())
    for ref in refs:
        for name, section in _numa_align_names(ref).items():
            node = node_of_resource(name)
            if node not in known:
                yield (ref, f"{ref.path}.resources.{section}.{name}",
                       f"no worker has NUMA node {node} (workers have nodes {format_cpulist(known) or 'none'})")


RULES: dict[str, Rule] = {
    "not-guaranteed": not_guaranteed,
    "fractional-cpu": fractional_cpu,
    "numa-align-limits": numa_align_limits,
    "several-nodes": several_nodes,
    "init-anchor": init_anchor,
    "capacity-count": capacity_count,
    "unknown-node": unknown_node,
}


DEFAULT_SCHEDULER = "default-scheduler"
UNKNOWN_SCHEDULER = "unknown-scheduler"


def _unknown_scheduler(workload: Workload, settings: LintSettings) -> list[Finding]:
    """A pod naming a scheduler the cluster does not run (the NUMA-aware one turned off) is never bound."""
    name = workload.pod_spec.get("schedulerName") or DEFAULT_SCHEDULER
    if settings.schedulers is None or name in settings.schedulers:
        return []
    path = f"{workload.spec_path}.schedulerName"
    runs = ", ".join(sorted(settings.schedulers))
    return [Finding(UNKNOWN_SCHEDULER, workload.source, workload.document, workload.line_of(path), workload.object,
                    "-", path, f"no scheduler {name!r} runs in the cluster (it runs {runs}): the pod stays Pending; "
                    "the lab's NUMA-aware scheduler (numa-aware) runs with numa_scheduler on")]


def lint_workload(workload: Workload, settings: LintSettings) -> list[Finding]:
    """Findings for one workload: its scheduler's name (any workload), and the pinning rules for workloads
    asking for numa-align."""
    refs = containers(workload.pod_spec, workload.spec_path)
    findings: list[Finding] = _unknown_scheduler(workload, settings)
    if not any(_numa_align_names(ref) for ref in refs):
        return findings
    for rule_name, rule in RULES.items():
        for ref, path, message in rule(workload, refs, settings):
            findings.append(Finding(rule_name, workload.source, workload.document, workload.line_of(path),
                                    workload.object, ref.name, path, message))
    return findings
