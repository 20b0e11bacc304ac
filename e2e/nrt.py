"""The NRT case: the NodeResourceTopology object numa-align publishes, judged against the pods the suite pinned.

While case 1's pods run (one per worker x NUMA node, each holding `cpus` exclusive CPUs and numa-align
devices of its node), each zone `node-N` must show exactly those taken: available = allocatable − what the
pinned pod holds, for cpu and numa-align/numa-N; memory drops only under the Static Memory Manager. The
plugin polls the kubelet every few seconds, so the object is asked again until it agrees or time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import api_outages
from kubernetes import client
from kubernetes.client.rest import ApiException
from numa_align.nrt_api import GROUP, PLURAL, VERSION

FINGERPRINT_PREFIX = "pfp0v001"
WAIT_SECONDS = 30.0


def read_nrt(api: client.ApiClient, node: str) -> dict[str, Any] | None:
    """The node's NRT object, or None when there is none (no CRD, or the plugin has not published)."""
    try:
        return client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, node)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def resources(nrt: Mapping[str, Any], node: int) -> dict[str, dict[str, int]] | None:
    """Zone node-N's resources as {name: {capacity, allocatable, available}} in whole units, or None."""
    for zone in nrt.get("zones") or []:
        if zone.get("name") == f"node-{node}" and zone.get("type") == "Node":
            return {r["name"]: {k: int(r[k]) for k in ("capacity", "allocatable", "available")}
                    for r in zone.get("resources") or []}
    return None


def judge_zone(nrt: Mapping[str, Any] | None, node: int, cpus: int, devices: int, memory_static: bool,
               policy: str) -> list[str]:
    """What is wrong with zone node-N while one pinned pod holds `cpus` CPUs and `devices` numa-align devices."""
    if nrt is None:
        return ["no NodeResourceTopology object (is numa_align_nrt on and the CRD applied?)"]
    attributes = {a["name"]: a["value"] for a in nrt.get("attributes") or []}
    problems = []
    if attributes.get("topologyManagerPolicy") != policy:
        problems.append(f"attribute topologyManagerPolicy {attributes.get('topologyManagerPolicy')!r}, "
                        f"expected {policy!r}")
    if not str(attributes.get("nodeTopologyPodsFingerprint", "")).startswith(FINGERPRINT_PREFIX):
        problems.append(f"no pod fingerprint attribute ({attributes.get('nodeTopologyPodsFingerprint')!r})")
    zone = resources(nrt, node)
    if zone is None:
        return [*problems, f"no zone node-{node} of type Node"]
    for name, taken in (("cpu", cpus), (f"numa-align/numa-{node}", devices)):
        if name not in zone:
            problems.append(f"zone node-{node} lists no {name}")
            continue
        got = zone[name]
        if got["available"] != got["allocatable"] - taken:
            problems.append(f"{name} available {got['available']}, expected {got['allocatable']} - {taken}")
    memory = zone.get("memory")
    if memory is None:
        problems.append(f"zone node-{node} lists no memory")
    elif memory_static and memory["available"] >= memory["allocatable"]:
        problems.append(f"memory available {memory['available']} not below allocatable under the Static policy")
    elif not memory_static and memory["available"] != memory["allocatable"]:
        problems.append(f"memory available {memory['available']} != allocatable {memory['allocatable']} "
                        "with no Memory Manager placement")
    return problems


def summary(nrt: Mapping[str, Any] | None, node: int) -> str:
    """'cpu 1/3 available, memory ...' for the table: zone node-N's available over allocatable."""
    zone = resources(nrt, node) if nrt is not None else None
    if not zone:
        return ""
    return ", ".join(f"{name} {r['available']}/{r['allocatable']}" for name, r in zone.items()
                     if name == "cpu" or name.startswith("numa-align/")) + " available"


def wait_agreeing(read: Callable[[], dict[str, Any] | None], judge: Callable[[dict[str, Any] | None], list[str]],
                  wait: float = WAIT_SECONDS, every: float = 2.0) -> tuple[dict[str, Any] | None, list[str]]:
    """Read until the judge finds nothing wrong or `wait` seconds pass; the last object and its problems."""
    deadline = api_outages.Deadline(wait)
    while True:
        nrt = read()
        problems = judge(nrt)
        if not problems or deadline.passed():
            return nrt, problems
        time.sleep(every)
