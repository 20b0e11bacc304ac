"""The kubelet's admission of one pod on one node: hints per container (or per pod), the policy's merge,
the managers' Allocate, then the node-level resource check.

Follows k8s.io/kubernetes v1.36.3: topologymanager scope_container.go / scope_pod.go Admit and
scope.go admitPolicyNone (providers in the kubelet's order: devices, CPUs, memory), then
lifecycle/predicate.go (the allocate handler runs before the predicate handler). Verdict strings are the
kubelet's own (TopologyAffinityError, UnexpectedAdmissionError, OutOf<resource>).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numalab.explain.allocation import AllocationError, Working
from numalab.explain.hints import cpu_hints, device_hints, memory_hints
from numalab.explain.merging import POLICIES, Hint, Mask, Merger, ProviderHints, merge, narrower
from numalab.explain.node_state import NodeState
from numalab.explain.requests import (
    CPU,
    HOST_LEVEL,
    ContainerRequest,
    PodRequest,
    container_devices,
    container_memory,
    guaranteed_cpus,
    is_memory,
    pod_total,
    scheduling_requests,
)

TOPOLOGY_AFFINITY_ERROR = ("TopologyAffinityError", "Resources cannot be allocated with Topology locality")
UNEXPECTED = "UnexpectedAdmissionError"


@dataclass
class Outcome:
    """verdict: admitted, rejected or cannot-judge; reason: the kubelet's "Reason: message" or why not judged."""

    verdict: str
    reason: str = ""
    cells: dict[str, list[int]] = field(default_factory=dict)
    hints: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class CannotJudge(Exception):
    """The pod or node needs something explain does not model or the API does not show."""


def device_names(state: NodeState) -> set[str]:
    """Device-plugin resources with NUMA affinity: what the cells list besides cpu, memory and hugepages."""
    return {name for cell in state.cells for name in cell.allocatable if name != CPU and not is_memory(name)}


def check_judgeable(pod: PodRequest, state: NodeState) -> None:
    if pod.pod_level_resources:
        raise CannotJudge("pod-level resources (spec.resources) are not modelled")
    known = set(state.allocatable) | device_names(state) | {CPU, *HOST_LEVEL}
    unknown = sorted({name for c in pod.containers for name in (*c.requests, *c.limits)
                      if name not in known and not is_memory(name)})
    if unknown:
        raise CannotJudge(f"unknown resource(s) {', '.join(unknown)}: neither the Node's allocatable nor any "
                          "NUMA cell lists them")
    settings = state.settings
    if settings.topology_policy not in POLICIES:
        raise CannotJudge(f"topology manager policy {settings.topology_policy!r} is not one of {', '.join(POLICIES)}")
    if any(guaranteed_cpus(pod, c) for c in pod.containers):
        if settings.cpu_policy is None:
            raise CannotJudge("the pod asks for exclusive CPUs and the kubelet's CPU Manager policy is unknown")
        if full_pcpus_only(state) and (not state.cpus_per_core or any(
                c.physical_cpus is None for c in state.cells if c.capacity.get(CPU, 0) > 0)):
            raise CannotJudge("full-pcpus-only is on and the NodeResourceTopology object lacks cpusPerCore or a "
                              "cell's availablePhysicalCpus (numa-align publishes them since issue 27)")
        if settings.cpu_policy == "static" and settings.cpu_option("align-by-socket"):
            raise CannotJudge("align-by-socket is on: the cells' sockets are not in the NodeResourceTopology object")
    if any(container_memory(pod, c) for c in pod.containers) and settings.memory_policy not in ("None", "Static"):
        raise CannotJudge(f"the kubelet's Memory Manager policy is {settings.memory_policy or 'unknown'}")


def full_pcpus_only(state: NodeState) -> bool:
    settings = state.settings
    return settings.cpu_policy == "static" and bool(settings.cpu_option("full-pcpus-only"))


class Admission:
    """One pod on one node: scope and providers as the kubelet runs them."""

    def __init__(self, pod: PodRequest, state: NodeState) -> None:
        self.pod, self.state, self.work = pod, state, Working.of(state)
        self.devices = device_names(state)
        cells = state.cell_ids()
        settings = state.settings
        self.merger = Merger(cells, state.distances(), bool(settings.topology_option("prefer-closest-numa-nodes")))
        self.outcome = Outcome("admitted")

    def providers(self, cpus: int, memory: dict[str, int], devices: dict[str, int]) -> list[ProviderHints]:
        cells = self.work.cells(self.state)
        settings = self.state.settings
        device = {name: device_hints(cells, name, count, self.work.reusable.get(name, {}))
                  for name, count in devices.items()}
        cpu = ({CPU: cpu_hints(cells, cpus, self.work.reusable.get(CPU, {}))}
               if cpus and settings.cpu_policy == "static" else None)
        mem = (memory_hints(cells, memory, self.work.groups, self.work.reusable_memory)
               if memory and settings.memory_policy == "Static" else None)
        return [device, cpu, mem]

    def record(self, label: str, providers: list[ProviderHints]) -> None:
        for provider in providers:
            for resource, hints in (provider or {}).items():
                key = f"{label}{resource}"
                self.outcome.hints[key] = [h.as_dict() for h in hints] if hints is not None else []

    def affinity(self, label: str, cpus: int, memory: dict[str, int], devices: dict[str, int]) -> Hint | None:
        """The merged hint, or None (and the rejection recorded) when the policy refuses it."""
        providers = self.providers(cpus, memory, devices)
        self.record(label, providers)
        best, admit = merge(self.state.settings.topology_policy, providers, self.merger)
        if not admit:
            self.outcome.verdict, self.outcome.reason = "rejected", ": ".join(TOPOLOGY_AFFINITY_ERROR)
            return None
        return best

    def allocate(self, container: ContainerRequest, hint: Hint) -> None:
        """Allocate of the device manager, CPU Manager and Memory Manager, in that order."""
        for name, count in container_devices(container, self.devices).items():
            self.note_cells(name, self.work.take(name, count, hint.cells, container.kind))
        cpus = guaranteed_cpus(self.pod, container)
        if cpus and self.state.settings.cpu_policy == "static":
            per_core = self.state.cpus_per_core or 1
            whole = full_pcpus_only(self.state)
            if whole:
                self.work.check_whole_cores(cpus, per_core)
            before = {cell: free.get(CPU, 0) for cell, free in self.work.available.items()}
            self.note_cells(CPU, self.work.take(CPU, cpus, hint.cells, container.kind))
            freed = {cell: count - self.work.available[cell].get(CPU, 0) for cell, count in before.items()}
            split = self.work.take_cores({cell: n for cell, n in freed.items() if n}, per_core)
            if whole and split:
                self.outcome.notes.append(
                    f"{container.name}: cell(s) {','.join(map(str, split))} lack free whole cores: the kubelet "
                    "(v1.36.3) counts free CPUs, not cores, for hints and admission and gives threads of partly "
                    "held cores (full-pcpus-only checks only the count)")
        memory = container_memory(self.pod, container)
        if memory and self.state.settings.memory_policy == "Static":
            mask = self.memory_mask(memory, hint)
            self.work.take_memory(memory, mask, container.kind)
            for name in memory:
                self.note_cells(name, dict.fromkeys(mask, 1))

    def memory_mask(self, memory: dict[str, int], hint: Hint) -> Mask:
        """memorymanager Allocate: the default hint for "any", the hint extended when its cells lack the free
        memory, and the group rule checked last."""
        hints = memory_hints(self.work.cells(self.state), memory, self.work.groups, self.work.reusable_memory)
        options = next(iter(hints.values()), [])
        best = hint
        if hint.cells is None:
            if not options:
                raise AllocationError("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes "
                                      "with enough memory is available")
            best = _find_best(options)
        assert best.cells is not None
        if any(sum(self.work.available[c].get(r, 0) for c in best.cells) < size for r, size in memory.items()):
            wider = [h for h in options if h.cells is not None and best.cells <= h.cells]
            if not wider:
                raise AllocationError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
            extended = _find_best(wider)
            if not extended.preferred and best.preferred:
                raise AllocationError("[memorymanager] failed to find the extended preferred hint")
            best = extended
        mask = best.cells
        assert mask is not None
        if len(mask) > 1 and any(c in self.work.groups and self.work.groups[c] != mask for c in mask):
            raise AllocationError("[memorymanager] preferred hint violates NUMA node allocation")
        return mask

    def note_cells(self, resource: str, taken: dict[int, int]) -> None:
        self.outcome.cells[resource] = sorted(set(self.outcome.cells.get(resource, [])) | set(taken))

    def run(self) -> Outcome:
        pod, settings = self.pod, self.state.settings
        try:
            if settings.topology_policy == "none":
                for container in pod.containers:
                    self.allocate(container, Hint(None, True))
            elif settings.scope == "pod":
                hint = self.affinity("", pod_total(pod, lambda c: {CPU: guaranteed_cpus(pod, c)}).get(CPU, 0),
                                     pod_total(pod, lambda c: container_memory(pod, c)),
                                     pod_total(pod, lambda c: container_devices(c, self.devices)))
                if hint is None:
                    return self.outcome
                for container in pod.containers:
                    self.allocate(container, hint)
            else:
                for container in pod.containers:
                    hint = self.affinity(f"{container.name}: ", guaranteed_cpus(pod, container),
                                         container_memory(pod, container), container_devices(container, self.devices))
                    if hint is None:
                        return self.outcome
                    self.allocate(container, hint)
        except AllocationError as exc:
            self.outcome.verdict = "rejected"
            self.outcome.reason = (f"{exc.kind}: {exc}" if exc.kind else
                                   f"{UNEXPECTED}: Allocate failed due to {exc}, which is unexpected")
            return self.outcome
        self.node_fit()
        return self.outcome

    def node_fit(self) -> None:
        """lifecycle/predicate.go: the first resource the node lacks, pods first, then cpu, memory, the rest."""
        wanted = {"pods": 1, **{k: v for k, v in scheduling_requests(self.pod).items() if v}}
        first = ["pods", CPU, "memory", "ephemeral-storage"]
        for name in sorted(wanted, key=lambda n: (first.index(n) if n in first else len(first), n)):
            capacity = self.state.allocatable.get(name)
            if capacity is None and name == "pods":
                continue
            used = self.state.used.get(name, 0)
            if wanted[name] > (capacity or 0) - used:
                self.outcome.verdict = "rejected"
                self.outcome.reason = (f"OutOf{name}: Node didn't have enough resource: {name}, requested: "
                                       f"{wanted[name]}, used: {used}, capacity: {capacity or 0}")
                return


def _find_best(hints: list[Hint]) -> Hint:
    """memorymanager findBestHint: preferred first, then the narrowest."""
    best = hints[0]
    for hint in hints[1:]:
        assert hint.cells is not None and best.cells is not None
        if (hint.preferred and not best.preferred) or (hint.preferred == best.preferred
                                                       and narrower(hint.cells, best.cells)):
            best = hint
    return best


def admit(pod: PodRequest, state: NodeState) -> Outcome:
    """The verdict of `state`'s kubelet on `pod`; cannot-judge (with why) rather than a guess."""
    try:
        check_judgeable(pod, state)
    except CannotJudge as exc:
        return Outcome("cannot-judge", f"cannot judge: {exc}")
    outcome = Admission(pod, state).run()
    if not pod.guaranteed:
        outcome.notes.append(f"{pod.qos} pod: its containers run on the shared CPUs, no CPU or memory alignment")
    return outcome
