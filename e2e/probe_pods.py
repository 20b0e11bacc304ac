"""Manifests of the pods the e2e suite creates: the probe script as each container's command.

Pure functions (plain dicts for the kubernetes client), so tests/ can check their QoS and lint them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from numa_align.devices import resource_name

PROBE_SCRIPT = (Path(__file__).parent / "probe.sh").read_text()
HOLD_SECONDS = 3600
"""How long a probe container stays up after printing, so the PodResources API still lists it."""
MEMORY = "64Mi"
SUITE_LABEL = "numa-lab.e2e/case"
RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Fits the `restricted` Pod Security level, which a hardened RKE2 may enforce on new namespaces."""


def dns_label(*parts: str) -> str:
    """A pod name from parts: lower case, [a-z0-9-], at most 63 characters."""
    text = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return text[:63].rstrip("-")


def probe_container(name: str, cpu: str, cpu_limit: str | None = None, numa_node: int | None = None,
                    devices: int = 1, hold: bool = True, image: str = "") -> dict[str, Any]:
    """A container that runs the probe; Guaranteed-shaped when cpu_limit is None (limits == requests)."""
    requests = {"cpu": cpu, "memory": MEMORY}
    limits = {"cpu": cpu_limit or cpu, "memory": MEMORY}
    if numa_node is not None:
        requests[resource_name(numa_node)] = str(devices)
        limits[resource_name(numa_node)] = str(devices)
    command = PROBE_SCRIPT + (f"\nsleep {HOLD_SECONDS}\n" if hold else "")
    return {
        "name": name,
        "image": image,
        "command": ["sh", "-c", command],
        "resources": {"requests": requests, "limits": limits},
        "securityContext": RESTRICTED,
    }


def probe_pod(name: str, worker: str, case: str, containers: list[dict[str, Any]],
              init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A pod bound to one worker by its hostname label; never restarted, so a failure stays visible."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": worker},
        "terminationGracePeriodSeconds": 0,
        "containers": containers,
    }
    if init_containers:
        spec["initContainers"] = init_containers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SUITE_LABEL: case}},
        "spec": spec,
    }


def devices_for(cpus: int, capacity_mode: str) -> int:
    """numa-align devices to request with `cpus` exclusive cpus: one slot, or one device per CPU."""
    return cpus if capacity_mode == "cpus" else 1


def pinned_pod(worker: str, node: int, image: str, capacity_mode: str, cpus: int = 1) -> dict[str, Any]:
    """Case 1: one Guaranteed container asking for numa-align/numa-<node>."""
    container = probe_container("probe", str(cpus), numa_node=node, devices=devices_for(cpus, capacity_mode),
                                image=image)
    return probe_pod(dns_label("pin", worker, f"n{node}"), worker, "pinned", [container])


def multi_container_pod(worker: str, node: int, image: str, capacity_mode: str, cpus: int = 1) -> dict[str, Any]:
    """Case 2: an anchoring init container and the app both ask for numa-<node>; a Guaranteed sidecar
    does not. Each asks `cpus` (a whole core under full-pcpus-only)."""
    devices = devices_for(cpus, capacity_mode)
    anchor = probe_container("anchor", str(cpus), numa_node=node, devices=devices, hold=False, image=image)
    app = probe_container("app", str(cpus), numa_node=node, devices=devices, image=image)
    sidecar = probe_container("sidecar", str(cpus), image=image)
    return probe_pod(dns_label("multi", worker, f"n{node}"), worker, "multi", [app, sidecar], [anchor])


def burstable_pod(worker: str, image: str) -> dict[str, Any]:
    """Case 3: a fractional CPU request below its limit: Burstable, so never pinned."""
    container = probe_container("probe", "100m", cpu_limit="500m", image=image)
    return probe_pod(dns_label("burst", worker), worker, "burstable", [container])


def exhaustion_pod(worker: str, node: int, cpus: int, image: str, capacity_mode: str) -> dict[str, Any]:
    """Case 4: more exclusive CPUs on numa-<node> than it has free."""
    container = probe_container("probe", str(cpus), numa_node=node, devices=devices_for(cpus, capacity_mode),
                                hold=False, image=image)
    return probe_pod(dns_label("exhaust", worker, f"n{node}"), worker, "exhaustion", [container])
