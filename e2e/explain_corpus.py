"""Case 8's corpus: (pod, node state) pairs per worker for `numalab explain` to predict and the real kubelet to
judge, the kubelet's real outcome read back from the API, and the comparison of the two.

Pure: a worker's NodeResourceTopology object, Node and kubelet /configz in, pod manifests out (the probe
image's `sleep`, tiny requests); a pod as read and numa-align's allocations annotation in, an Outcome out. Pairs
are sized from the worker's own cells (available CPUs, memory and hugepages per cell, CPUs per whole core under
full-pcpus-only), never from its name. `expect` is what the kubelet's rules give (k8s.io/kubernetes v1.36.3:
single-numa-node keeps one-cell hints, the narrowest then lowest cell wins; scope pod takes max(init, sum of
apps)); it is written only for a worker run that way (the closest- pairs of closest_pairs.py follow their own
rule), and only the unit tests judge explain against it; the e2e case judges explain against the kubelet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from closest_pairs import closest_pairs, prefer_closest
from kubelet_outcome import Outcome
from numa_align.devices import node_of_resource, resource_name
from probe_pods import RESTRICTED, SUITE_LABEL, devices_for, dns_label

from numalab.explain.node_state import node_allocatable
from numalab.explain.requests import container_devices, container_memory, guaranteed_cpus, pod_request
from numalab.top.nrt import Allocation, parse_nrt

CASE = "explain"
MI = 2**20
POD_MEMORY, FILLER_MEMORY, MARGIN, PAGE = 32 * MI, 16 * MI, 64 * MI, 2 * MI
HUGEPAGES = "hugepages-2Mi"
HOLD, INIT_RUN = "3600", "1"
TAE, SMT, UNEXPECTED, OUT_OF_CPU = "TopologyAffinityError", "SMTAlignmentError", "UnexpectedAdmissionError", "OutOfcpu"


@dataclass(frozen=True)
class Cell:
    """What one NUMA cell has available now: whole CPUs, memory and hugepages-2Mi bytes; capacity: its online CPUs,
    reserved included (what the kubelet sizes a hint's width by); costs: distance to each cell id."""

    id: int
    cpus: int
    memory: int
    hugepages: int
    capacity: int = 0
    costs: Mapping[int, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Shape:
    """A worker as the corpus sizes pods for it. unit: CPUs a Guaranteed container asks (a whole core under
    full-pcpus-only); rules: single-numa-node, scope pod, static CPU Manager (the rules `expect` follows);
    policy, prefer_closest, cpu_static, scope: what closest_pairs needs to know of the kubelet."""

    worker: str
    cells: tuple[Cell, ...]
    unit: int
    memory_static: bool
    node_cpus: int
    capacity_mode: str
    rules: bool
    policy: str = ""
    prefer_closest: bool = False
    cpu_static: bool = False
    scope: str = "container"

    def minus(self, cell: int, cpus: int, memory: int) -> Shape:
        """The shape once a filler holds `cpus` and `memory` of `cell`."""
        cells = tuple(replace(c, cpus=c.cpus - cpus, memory=c.memory - memory) if c.id == cell else c
                      for c in self.cells)
        return replace(self, cells=cells)


@dataclass(frozen=True)
class Held:
    """What the annotation shows of the pod once the kubelet admitted it in full (app containers and sidecars:
    PodResources lists no regular init container): its exclusive CPUs, regular memory (Static Memory Manager)
    and numa-align devices. Read before that, the kubelet may still be allocating (devices, then CPUs, then
    memory), and the entry is missing what comes last."""

    cpus: int
    memory: bool
    devices: frozenset[str]

    def missing(self, allocation: Allocation) -> list[str]:
        """What `allocation` lacks of this (nothing: the admission is in it whole)."""
        return ([f"{len(allocation.cpus)} of {self.cpus} CPUs"] if len(allocation.cpus) < self.cpus else []) + (
            ["no memory"] if self.memory and not any(allocation.memory.values()) else []) + (
            [f"no {name}" for name in sorted(self.devices) if not allocation.devices.get(name)])


@dataclass(frozen=True)
class Pair:
    """One pod for one worker, after `fillers` (pods left admitted to take cells) are in; holds: the kubelet
    reports an allocation for it once admitted (exclusive CPUs, Static-placed memory or numa-align devices);
    baseline: the kubelet's outcome in the setting `baseline_is` names (closest- pairs only: without
    prefer-closest-numa-nodes, or under scope pod for a pod aligned container by container)."""

    name: str
    worker: str
    pod: dict[str, Any]
    fillers: tuple[dict[str, Any], ...] = ()
    expect: Outcome | None = None
    holds: bool = False
    baseline: Outcome | None = None
    baseline_is: str = "without prefer-closest-numa-nodes"
    full: Held | None = None


def worker_shape(worker: str, nrt: Mapping[str, Any], node: Mapping[str, Any] | None,
                 kubelet_config: Mapping[str, Any], unit: int, capacity_mode: str) -> Shape:
    """From the worker's NRT zones (available and CPU capacity per cell, costs), Node allocatable and kubelet
    configuration."""
    zones = [z for z in parse_nrt(nrt).zones if z.numa_id is not None]
    cells = []
    for zone in zones:
        free = {name: a.available for name, a in zone.resources.items()}
        cpu = zone.resources.get("cpu")
        costs = {int(n.removeprefix("node-")): v for n, v in zone.costs.items() if n.removeprefix("node-").isdigit()}
        cells.append(Cell(zone.numa_id, free.get("cpu", 0), free.get("memory", 0), free.get(HUGEPAGES, 0),
                          cpu.capacity if cpu else 0, costs))
    policy, cpu_policy = kubelet_config.get("topologyManagerPolicy"), kubelet_config.get("cpuManagerPolicy")
    rules = (policy, kubelet_config.get("topologyManagerScope"), cpu_policy) == ("single-numa-node", "pod", "static")
    return Shape(worker, tuple(cells), unit, kubelet_config.get("memoryManagerPolicy") == "Static",
                 node_allocatable(node).get("cpu", 0) // 1000, capacity_mode, rules, str(policy or "none"),
                 prefer_closest(kubelet_config), cpu_policy == "static",
                 str(kubelet_config.get("topologyManagerScope") or "container"))


def fit(shape: Shape, cpus: int, memory: int, device: int | None = None, hugepages: int = 0) -> int | None:
    """single-numa-node: the lowest cell where every hint meets (CPUs, Static memory and hugepages, the device's
    own cell), or None (TopologyAffinityError)."""
    return next((cell.id for cell in shape.cells if cell.cpus >= cpus and device in (None, cell.id) and not (
        shape.memory_static and (cell.memory < memory or cell.hugepages < hugepages))), None)


def placed(shape: Shape, cpus: int, memory: int, device: int | None = None, hugepages: int = 0) -> Outcome:
    """The expected outcome of a pod asking exclusive `cpus` and Guaranteed `memory` (0: not Guaranteed)."""
    cell = fit(shape, cpus, memory, device, hugepages)
    if cell is None:
        return Outcome("rejected", TAE)
    cells = {} if device is None else {resource_name(device): [device]}
    wanted = {"cpu": cpus, "memory": memory if shape.memory_static else 0,
              HUGEPAGES: hugepages if shape.memory_static else 0}
    return Outcome("admitted", cells={**cells, **{name: [cell] for name, amount in wanted.items() if amount}})


def whole_cores(shape: Shape, cpus: int) -> Outcome:
    """full-pcpus-only: the topology manager admits first, then the CPU Manager refuses part of a core."""
    if cpus % shape.unit and fit(shape, cpus, POD_MEMORY) is not None:
        return Outcome("rejected", SMT)
    return placed(shape, cpus, POD_MEMORY)


def _mib(size: int) -> str:
    return f"{-(-size // MI)}Mi"


class _Builder:
    """Manifests for one worker: containers that sleep, pods bound by spec.nodeName."""

    def __init__(self, shape: Shape, image: str) -> None:
        self.shape, self.image = shape, image

    def container(self, name: str, requests: dict[str, str], limits: dict[str, str],
                  seconds: str = HOLD) -> dict[str, Any]:
        return {"name": name, "image": self.image, "command": ["sleep", seconds],
                "resources": {"requests": requests, "limits": limits}, "securityContext": RESTRICTED}

    def guaranteed(self, name: str, cpu: int | str, memory: int = POD_MEMORY, device: int | None = None,
                   hugepages: int = 0, seconds: str = HOLD) -> dict[str, Any]:
        amounts = {"cpu": str(cpu), "memory": _mib(memory)}
        if device is not None:
            count = devices_for(cpu if isinstance(cpu, int) else 1, self.shape.capacity_mode)
            amounts[resource_name(device)] = str(count)
        if hugepages:
            amounts[HUGEPAGES] = _mib(hugepages)
        return self.container(name, amounts, dict(amounts), seconds)

    def burstable(self, name: str, cpu: str = "100m", device: int | None = None) -> dict[str, Any]:
        extra = {} if device is None else {resource_name(device): "1"}
        return self.container(name, {"cpu": cpu, "memory": _mib(POD_MEMORY), **extra},
                              {"cpu": f"{2 * int(cpu)}" if cpu.isdigit() else "500m", **extra})

    def pod(self, name: str, containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
        spec: dict[str, Any] = {"restartPolicy": "Never", "nodeName": self.shape.worker,
                                "terminationGracePeriodSeconds": 0, "containers": containers}
        if inits:
            spec["initContainers"] = inits
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": dns_label(CASE, self.shape.worker, name), "labels": {SUITE_LABEL: CASE}},
                "spec": spec}

    def filler(self, pair: str, index: int, cell: int, cpus: int) -> dict[str, Any]:
        return self.pod(f"{pair}-fill-{index}", [self.guaranteed("fill", cpus, FILLER_MEMORY, device=cell)])

    def pair(self, name: str, containers: list[dict[str, Any]], expect: Outcome,
             inits: list[dict[str, Any]] | None = None, fillers: tuple[dict[str, Any], ...] = ()) -> Pair:
        body = self.pod(name, containers, inits)
        request = pod_request(body, name)
        devices = {n for c in request.containers for n in c.limits if node_of_resource(n) is not None}
        holds = any(container_devices(c, devices) for c in request.containers) or (request.guaranteed and any(
            guaranteed_cpus(request, c) or (self.shape.memory_static and container_memory(request, c))
            for c in request.containers))
        apps = [c for c in request.containers if c.kind != "init"]
        full = Held(sum(guaranteed_cpus(request, c) for c in apps),
                    self.shape.memory_static and any(container_memory(request, c).get("memory") for c in apps),
                    frozenset(n for c in apps for n in container_devices(c, devices)))
        return Pair(name, self.shape.worker, body, fillers, expect if self.shape.rules else None, holds, full=full)


def corpus(shape: Shape, image: str) -> list[Pair]:
    """The worker's pairs; none when no cell has a whole unit of CPUs free."""
    b, u = _Builder(shape, image), shape.unit
    roomy = [c for c in shape.cells if c.cpus >= u]
    if not roomy:
        return []
    most = max(c.cpus // u * u for c in roomy)
    biggest = [c for c in roomy if c.cpus >= most]
    last = roomy[-1].id
    pairs = [
        b.pair("guaranteed-unit", [b.guaranteed("app", u)], placed(shape, u, POD_MEMORY)),
        b.pair("larger-than-any-cell", [b.guaranteed("app", most + u)], placed(shape, most + u, POD_MEMORY)),
        b.pair("burstable", [b.burstable("app")], Outcome("admitted")),
        b.pair("besteffort", [b.container("app", {}, {})], Outcome("admitted")),
        b.pair("burstable-over-node", [b.burstable("app", str(shape.node_cpus + 1))], Outcome("rejected", OUT_OF_CPU)),
        b.pair("fractional-guaranteed", [b.guaranteed("app", "500m")], placed(shape, 0, POD_MEMORY)),
        b.pair("init-container", [b.guaranteed("app", u)], placed(shape, most, POD_MEMORY),
               inits=[b.guaranteed("init", most, seconds=INIT_RUN)]),
        b.pair("init-larger-than-any-cell", [b.guaranteed("app", u)], placed(shape, most + u, POD_MEMORY),
               inits=[b.guaranteed("init", most + u, seconds=INIT_RUN)]),
        b.pair("multi-container", [b.guaranteed("a", u), b.guaranteed("b", u)], placed(shape, 2 * u, 2 * POD_MEMORY)),
        b.pair("multi-container-shared", [b.guaranteed("pinned", u), b.guaranteed("shared", "500m")],
               placed(shape, u, 2 * POD_MEMORY)),
        b.pair("device-matching", [b.guaranteed("app", u, device=last)], placed(shape, u, POD_MEMORY, last)),
        b.pair("burstable-device", [b.burstable("app", device=last)], placed(shape, 0, 0, last)),
    ]
    other = next((c.id for c in shape.cells if c.cpus and c.id != biggest[0].id), None)
    if len(biggest) == 1 and other is not None:  # one cell holds `most` CPUs; then a device asks another cell
        pairs += [b.pair("emptier-cell-cpus", [b.guaranteed("app", most)], placed(shape, most, POD_MEMORY)),
                  b.pair("device-contradicting", [b.guaranteed("app", most, device=other)],
                         placed(shape, most, POD_MEMORY, other))]
    else:  # equal cells: a filler takes the first, the pod's device asks for it, its CPUs fit only elsewhere
        first = roomy[0]
        after = shape.minus(first.id, first.cpus // u * u, FILLER_MEMORY)
        filler = b.filler("device-contradicting", 0, first.id, first.cpus // u * u)
        pairs.append(b.pair("device-contradicting", [b.guaranteed("app", u, device=first.id)],
                            placed(after, u, POD_MEMORY, first.id), fillers=(filler,)))
    if u > 1:
        pairs += [b.pair("whole-core-split", [b.guaranteed("app", 1)], whole_cores(shape, 1)),
                  b.pair("whole-core-odd", [b.guaranteed("app", u + 1)], whole_cores(shape, u + 1))]
    if shape.memory_static:
        pairs += _memory_pairs(b, shape)
    return pairs + _exhausted_pairs(b, shape) + closest_pairs(b, shape)


def _memory_pairs(b: _Builder, shape: Shape) -> list[Pair]:
    """Memory sized past cells (Static Memory Manager), hugepages where a cell has them and where none has enough."""
    u = shape.unit
    pairs = []
    roomiest = max((c for c in shape.cells if c.cpus >= u), key=lambda c: (c.memory, -c.id))
    beside = max(c.memory for c in shape.cells if c.id != roomiest.id) if len(shape.cells) > 1 else 0
    emptier = -(-beside // MI) * MI + MARGIN
    if emptier <= roomiest.memory:
        pairs.append(b.pair("memory-emptier-cell", [b.guaranteed("app", u, emptier)], placed(shape, u, emptier)))
    larger = -(-max(c.memory for c in shape.cells) // MI) * MI + MARGIN
    pairs.append(b.pair("memory-larger-than-any-cell", [b.guaranteed("app", u, larger)], placed(shape, u, larger)))
    with_pages = [c for c in shape.cells if c.hugepages >= PAGE and c.cpus >= u]
    if with_pages:
        size = min(POD_MEMORY, with_pages[0].hugepages // PAGE * PAGE)
        pairs.append(b.pair("hugepages", [b.guaranteed("app", u, hugepages=size)],
                            placed(shape, u, POD_MEMORY, hugepages=size)))
    total = sum(c.hugepages for c in shape.cells)
    # No set of cells holds them: the memory provider has no hint, the CPUs' cell is admitted, and the Memory
    # Manager's Allocate cannot extend it (memorymanager extendTopologyManagerHint).
    expect = Outcome("rejected", UNEXPECTED) if fit(shape, u, POD_MEMORY) is not None else Outcome("rejected", TAE)
    pairs.append(b.pair("hugepages-none" if not total else "hugepages-too-many",
                        [b.guaranteed("app", u, hugepages=total // PAGE * PAGE + PAGE)], expect))
    return pairs


def _exhausted_pairs(b: _Builder, shape: Shape) -> list[Pair]:
    """Fillers take the cell a pod would get (it lands on the next) or every cell (it is refused)."""
    u = shape.unit
    pairs = []
    first = fit(shape, u, POD_MEMORY)
    if first is not None:
        take = next(c for c in shape.cells if c.id == first).cpus // u * u
        after = shape.minus(first, take, FILLER_MEMORY)
        if fit(after, u, POD_MEMORY) is not None:
            pairs.append(b.pair("exhausted-cell-next", [b.guaranteed("app", u)], placed(after, u, POD_MEMORY),
                                fillers=(b.filler("exhausted-cell-next", 0, first, take),)))
    takes = {c.id: c.cpus // u * u for c in shape.cells if c.cpus >= u}
    if sum(takes.values()) <= shape.node_cpus:
        after = shape
        for cell, take in takes.items():
            after = after.minus(cell, take, FILLER_MEMORY)
        fillers = tuple(b.filler("exhausted-all", i, cell, take) for i, (cell, take) in enumerate(takes.items()))
        pairs.append(b.pair("exhausted-all", [b.guaranteed("app", u)], placed(after, u, POD_MEMORY), fillers=fillers))
    return pairs
