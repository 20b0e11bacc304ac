"""The bench's workload: a seeded, endless stream of Pods and Deployments for one scheduler.

Guaranteed pods of 1, 2, 4 or 8 CPUs (memory 1Gi a CPU), some asking for most of a cell's memory, some for
2Mi hugepages; Burstable pods (the shared pool); Deployments whose replicas are Guaranteed. The same seed gives
the same sequence, so two schedulers can be handed equal workloads side by side (different `prefix`es keep
their names apart). `workload()` never ends: "until the fleet is full" is the bench's loop; `at_rate` paces it
in pods per second and `burst` takes a first batch at once.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from numalab.fleet.errors import FleetError

IMAGE = "numa-lab/pause"
"""Never pulled: kwok nodes run no containers."""
WORKLOAD_LABEL = "numa-lab/workload"


@dataclass(frozen=True)
class Mix:
    """Relative weights of the kinds of object, of CPU counts of Guaranteed pods, and the sizes used."""

    kinds: Mapping[str, float] = field(default_factory=lambda: {
        "guaranteed": 0.5, "big-memory": 0.1, "hugepages": 0.1, "burstable": 0.2, "deployment": 0.1})
    cpus: Mapping[int, float] = field(default_factory=lambda: {1: 4, 2: 4, 4: 2, 8: 1})
    replicas: tuple[int, int] = (2, 4)
    big_memory: str = "10Gi"
    """Most of a cell of the smaller shapes (14-16Gi allocatable): two such pods never share one."""
    hugepages: str = "512Mi"

    def check(self) -> None:
        kinds = set(self.kinds) - set(_BUILDERS)
        if kinds:
            raise FleetError(f"mix.kinds: unknown kind {sorted(kinds)[0]!r} (known: {', '.join(_BUILDERS)})")
        for where, weights in (("mix.kinds", self.kinds), ("mix.cpus", self.cpus)):
            bad = [k for k, w in weights.items() if isinstance(w, bool) or not isinstance(w, int | float) or w < 0]
            if bad or not any(weights.values()):
                raise FleetError(f"{where}: weights must be numbers >= 0, at least one above 0, got {dict(weights)}")
        if any(c < 1 for c in self.cpus) or not 1 <= self.replicas[0] <= self.replicas[1]:
            raise FleetError(f"mix: CPU counts must be >= 1 and replicas a range of at least 1, got {dict(self.cpus)} "
                             f"and {self.replicas}")


def _container(cpu: str, memory: str, limits: Mapping[str, str] | None = None, **extra: str) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **extra}
    return {"name": "main", "image": IMAGE, "resources": {"requests": requests, "limits": dict(limits or requests)}}


def _pod(name: str, namespace: str, scheduler: str, prefix: str, container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {WORKLOAD_LABEL: prefix}},
            "spec": {"schedulerName": scheduler, "containers": [container], "terminationGracePeriodSeconds": 0}}


def _guaranteed(rng: random.Random, mix: Mix) -> dict[str, Any]:
    cpus = _pick(rng, mix.cpus)
    return _container(str(cpus), f"{cpus}Gi")


def _big_memory(rng: random.Random, mix: Mix) -> dict[str, Any]:
    return _container(str(_pick(rng, mix.cpus)), mix.big_memory)


def _hugepages(rng: random.Random, mix: Mix) -> dict[str, Any]:
    cpus = _pick(rng, mix.cpus)
    return _container(str(cpus), f"{cpus}Gi", **{"hugepages-2Mi": mix.hugepages})


def _burstable(rng: random.Random, mix: Mix) -> dict[str, Any]:
    return _container("500m", "512Mi", {"cpu": "2", "memory": "1Gi"})


_BUILDERS: dict[str, Callable[[random.Random, Mix], dict[str, Any]]] = {
    "guaranteed": _guaranteed, "big-memory": _big_memory, "hugepages": _hugepages, "burstable": _burstable,
    "deployment": _guaranteed}


def _pick(rng: random.Random, weights: Mapping[Any, float]) -> Any:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def workload(scheduler: str, seed: int = 0, mix: Mix | None = None, namespace: str = "default",
             prefix: str | None = None, deployment_namespace: str | None = None) -> Iterator[dict[str, Any]]:
    """Endless objects to create, each with spec.schedulerName `scheduler`; names <prefix>-<kind>-<n>; the
    Deployments in `deployment_namespace` (default: `namespace`)."""
    deployment_namespace = deployment_namespace or namespace
    mix = mix or Mix()
    mix.check()
    prefix = prefix or scheduler
    rng = random.Random(seed)
    for n in itertools.count():
        kind = _pick(rng, mix.kinds)
        name = f"{prefix}-{kind}-{n:06d}"
        container = _BUILDERS[kind](rng, mix)
        if kind != "deployment":
            yield _pod(name, namespace, scheduler, prefix, container)
            continue
        template = _pod(name, deployment_namespace, scheduler, prefix, container)
        template["metadata"] = {"labels": {WORKLOAD_LABEL: prefix, "app": name}}
        del template["apiVersion"], template["kind"]
        yield {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": deployment_namespace, "labels": {WORKLOAD_LABEL: prefix}},
               "spec": {"replicas": rng.randint(*mix.replicas), "selector": {"matchLabels": {"app": name}},
                        "template": template}}


def pods_in(obj: Mapping[str, Any]) -> int:
    """Pods an object makes: 1 for a Pod, its replicas for a Deployment."""
    return int((obj.get("spec") or {}).get("replicas", 1)) if obj.get("kind") == "Deployment" else 1


def burst(objects: Iterable[dict[str, Any]], pods: int) -> list[dict[str, Any]]:
    """The first objects that make at least `pods` pods, to create at once."""
    taken: list[dict[str, Any]] = []
    count = 0
    for obj in objects:
        if count >= pods:
            break
        taken.append(obj)
        count += pods_in(obj)
    return taken


def at_rate(objects: Iterable[dict[str, Any]], pods_per_second: float, *, clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep) -> Iterator[dict[str, Any]]:
    """The objects, each when its pods are due at `pods_per_second` counted from the first; a consumer that
    fell behind gets the overdue ones at once, so the average rate holds."""
    if isinstance(pods_per_second, bool) or not isinstance(pods_per_second, int | float) or not pods_per_second > 0:
        raise FleetError(f"rate: expected pods per second > 0, got {pods_per_second!r}")
    start = clock()
    made = 0
    for obj in objects:
        due = start + made / pods_per_second
        wait = due - clock()
        if wait > 0:
            sleep(wait)
        yield obj
        made += pods_in(obj)
