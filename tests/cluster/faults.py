"""The cluster test's fault cases, on its one lab: each injects a fault, asserts the fault took effect, then
what recovered (or what was refused) and that nothing was lost, and adds a row to the fault table the test
prints (fault, how it was injected, what was checked, recovery time, what was lost). Here: the table, the
helpers every case shares, and the drain case; the others are in the fault_*.py modules beside it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from numa_align import nrt_api
from numa_align.fingerprint import ATTRIBUTE, SCHEDULER_COUNTED, pod_fingerprint

from numalab.deploy import draining
from numalab.model.node_reset import MARK, ResetError

NAMESPACE = "default"
LABEL = "numa-lab.cluster/fault"
RESYNC_GRACE = 12.0
"""Two of the NUMA-aware scheduler's resync periods (5 s) and room, as e2e case 9 waits."""


@dataclass(frozen=True)
class Fault:
    fault: str
    injected: str
    checked: str
    recovery: str
    lost: str


FAULTS: list[Fault] = []
"""Every fault case run so far, in order: the test's summary prints them as a table."""
FAILED: list[str] = []
"""The cases that failed, each with why: the test asserts there are none once every case ran."""


@contextmanager
def fault_case(name: str) -> Iterator[None]:
    """Run one fault case; a failure is kept (a FAIL row and FAILED) and the next case still runs, so one run
    shows every case. The test fails at its end when any did."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - every failure of the case is its row
        why = " ".join(str(exc).split())[:600] or type(exc).__name__
        FAULTS.append(Fault(name, "-", f"FAILED: {why}", "-", "-"))
        FAILED.append(f"{name}: {why}")


def fault_table() -> list[str]:
    """The table's lines, '' when no case ran."""
    if not FAULTS:
        return []
    head = ("fault", "injected", "checked", "recovery", "lost")
    rows = [head, *((f.fault, f.injected, f.checked, f.recovery, f.lost) for f in FAULTS)]
    return ["fault table:", *(" | ".join(row) for row in rows)]


def api(state: Path) -> client.ApiClient:
    return config.new_client_from_config(str(state / "kubeconfig"))


def wait(what: str, check: Callable[[], bool], timeout: float, every: float = 2.0,
         why: Callable[[], str] | None = None) -> float:
    """Seconds until check() holds; AssertionError naming `what` (and what why() says) after `timeout`."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not after {timeout:.0f} s" + (f" ({why()})" if why else ""))
        time.sleep(every)
    return time.monotonic() - started


def pod_status(core: client.CoreV1Api, name: str) -> str:
    """A pod's phase, node, conditions and container states, for a failure's message."""
    try:
        pod = core.read_namespaced_pod(name, NAMESPACE)
    except client.ApiException as exc:
        return f"{name}: {exc.status}"
    conditions = "; ".join(f"{c.type}={c.status} {c.reason or ''} {c.message or ''}".strip()
                           for c in pod.status.conditions or [])
    states = "; ".join(str(s.state) for s in pod.status.container_statuses or [])
    return f"{name} {pod.status.phase} on {pod.spec.node_name}: {conditions} {states}".strip()


def cordon_state(core: client.CoreV1Api, nodes: Iterable[str]) -> dict[str, tuple[bool, str | None]]:
    found = {}
    for name in nodes:
        node = core.read_node(name)
        found[name] = (bool(node.spec.unschedulable), (node.metadata.annotations or {}).get(MARK))
    return found


def _bare_pod(name: str, node: str, image: str, emptydir: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": image, "command": ["sleep", "3600"],
                        "resources": {"requests": {"memory": "16Mi"}, "limits": {"memory": "16Mi"}}}],
    }
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {LABEL: "drain"}}, "spec": spec}


def pods_in_the_drains_way(state: Path, node: str, image: str) -> Fault:
    """A bare pod and a pod with emptyDir data on `node`, both Running: the drain (numa-lab's own, through the
    Eviction API, as a reset calls it) is refused naming both pods and the keys that allow them; the node is
    not cordoned and both pods still run."""
    core = client.CoreV1Api(api(state))
    names = [f"fault-bare-{node}", f"fault-scratch-{node}"]
    for name, emptydir in zip(names, (False, True), strict=True):
        core.create_namespaced_pod(NAMESPACE, _bare_pod(name, node, image, emptydir))
    try:
        wait("the drain's obstacles Running", lambda: all(
            core.read_namespaced_pod(name, NAMESPACE).status.phase == "Running" for name in names), 180)
        try:
            draining.drain(state / "kubeconfig", node)
            refusal = ""
        except ResetError as exc:
            refusal = str(exc)
        assert f"{NAMESPACE}/{names[0]}" in refusal and f"{NAMESPACE}/{names[1]}" in refusal, refusal
        assert "drain_force" in refusal and "drain_delete_emptydir_data" in refusal, refusal
        assert cordon_state(core, [node]) == {node: (False, None)}
        phases = [core.read_namespaced_pod(name, NAMESPACE).status.phase for name in names]
        assert phases == ["Running", "Running"], phases
    finally:
        for name in names:
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
    return Fault("bare pod and emptyDir pod in the drain's way", f"a bare pod and an emptyDir pod on {node}",
                 "drain refused naming both pods and drain_force / drain_delete_emptydir_data; node not cordoned",
                 "n/a (refused before any change)", "nothing (both pods still Running)")


def guaranteed_pod(name: str, node: str, image: str, scheduler: str | None = None) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "32Mi"}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
        "containers": [{"name": "app", "image": image, "command": ["sleep", "3600"],
                        "resources": {"requests": resources, "limits": resources}}],
    }
    if scheduler is None:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = scheduler
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {LABEL: "stuck"}}, "spec": spec}


def bound_pods(core: client.CoreV1Api, node: str) -> list[tuple[str, str]]:
    """(namespace, name) of the pods bound to `node` that have not finished: what numa-lab's scheduler counts."""
    return [(p.metadata.namespace, p.metadata.name) for p in core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node},{SCHEDULER_COUNTED}").items]


def in_step(core: client.CoreV1Api, custom: client.CustomObjectsApi, node: str) -> bool:
    """Does `node`'s NRT object carry the fingerprint of its bound, unfinished pods (what the scheduler's resync
    checks)? The object covers the pods the kubelet admitted: a pod bound but not admitted yet holds it out."""
    nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, node)
    published = {a["name"]: a["value"] for a in nrt.get("attributes") or []}.get(ATTRIBUTE)
    return published == pod_fingerprint(bound_pods(core, node))
