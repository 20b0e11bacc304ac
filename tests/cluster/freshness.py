"""How fresh the topology data is, measured from outside with watches: for pinned pods made one at a time on
each worker, the time from the kubelet's admission to the node's NodeResourceTopology object naming the pod
(its `numa-align/allocations` annotation: the object's `available` changes in the same write).

The kubelet's admission has no timestamp of its own in the API; its first status of the pod (startTime set,
"acknowledged by the kubelet") is the earliest sign of it a watcher gets, a few ms after the admission (the
status manager posts it at once). Both events are timed by this process's clock when they arrive, so the
figure is what a user's watch sees. Also given: the time from the pod's creation (the kubelet's own
admission included). A figure, never an assertion (README: performance is measured, not asserted).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from numa_align import nrt_api

from numalab.percentiles import summary
from tests.cluster.faults import NAMESPACE, api, guaranteed_pod, pod_status, wait
from tests.cluster.guests import ssh

LABEL = "numa-lab/freshness"
FIELD_DEFAULT_SECONDS = 60  # what the field's topology exporters refresh at by default
GRACE_SECONDS = 1
"""Each pod is deleted gracefully and the next made once it is gone, i.e. once the kubelet has torn it down.
Deleted at once (grace 0) the object left the API at once while the kubelet's teardown (a few seconds of CPU on
an emulated guest) lagged behind: made every 10 s, 40 pods left worker-3's kubelet minutes behind (load 22,
housekeeping 2-5 s, the pod dirs of pods deleted 3 minutes before still there), and in CI a pod bound to it
went 60 s with no status at all: the figure measured the backlog, not the exporter. On worker-3, 40 pods: from
creation to named p50 8.0 s, p95 23 s, max 34 s deleted at once; 0.71, 0.96, 1.41 s deleted gracefully (13 s a
pod instead of 10)."""


@dataclass
class Seen:
    """Arrival times (time.monotonic) per pod name: created, first kubelet status, first named by the object;
    and each watch's failures (re-opened; a stream's ordinary end at WATCH_SECONDS is not one), shown with a
    miss and in the summary."""

    created: dict[str, float] = field(default_factory=dict)
    acknowledged: dict[str, float] = field(default_factory=dict)
    published: dict[str, float] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, where: dict[str, float], name: str) -> None:
        with self.lock:
            where.setdefault(name, time.monotonic())

    def failed(self, watch_name: str, why: str) -> None:
        with self.lock:
            self.failures.setdefault(watch_name, []).append(why)


WATCH_SECONDS = 60  # each stream's server-side timeout: the watch re-lists then (and on an error), never ends


def _keep_watching(name: str, stream: Callable[[watch.Watch], Iterator[dict]], on_object: Callable[[Any], None],
                   seen: Seen, stop: threading.Event) -> None:
    """Watch until stop, re-opening a stream that ended or failed (a re-list brings every object again, so a
    pod or annotation seen late is still seen; `note` keeps the first time). A watch that silently died left
    every later pod unseen, and the case failed with no word of why."""
    while not stop.is_set():
        w = watch.Watch()
        try:
            for event in stream(w):
                on_object(event["object"])
                if stop.is_set():
                    w.stop()
        except Exception as exc:  # noqa: BLE001 - any failure of the stream is re-opened, and shown with a miss
            if not stop.is_set():
                seen.failed(name, f"{type(exc).__name__}: {exc}"[:200])
            time.sleep(1)


def _open(lister: Callable[..., Any], w: watch.Watch) -> Iterator[dict]:
    """One stream of a list call, as _keep_watching opens it (again)."""
    return w.stream(lister, timeout_seconds=WATCH_SECONDS)


def _pod_seen(seen: Seen) -> Callable[[Any], None]:
    def on_pod(pod: Any) -> None:
        if pod.status is not None and pod.status.start_time is not None:
            seen.note(seen.acknowledged, pod.metadata.name)
    return on_pod


def _names_in(nrt: dict) -> list[str]:
    """The freshness pods an object's `numa-align/allocations` annotation names."""
    annotations = nrt.get("metadata", {}).get("annotations") or {}
    keys = [key.partition("/") for key in json.loads(annotations.get(nrt_api.ALLOCATIONS_ANNOTATION, "{}"))]
    return [name for namespace, _, name in keys if namespace == NAMESPACE and name.startswith("fresh-")]


def _object_seen(seen: Seen) -> Callable[[Any], None]:
    def on_object(nrt: Any) -> None:
        for name in _names_in(nrt):
            seen.note(seen.published, name)
    return on_object


def _why_missed(core: client.CoreV1Api, custom: client.CustomObjectsApi, seen: Seen, name: str,
                worker: str) -> str:
    """For a pod not seen named and acknowledged in time: what the API says now, and what the watches saw."""
    try:
        nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, worker)
        named = f"{worker}'s object names {_names_in(nrt) or 'no freshness pod'} " \
            f"(resourceVersion {nrt['metadata'].get('resourceVersion')})"
    except client.ApiException as exc:
        named = f"{worker}'s object: {exc.status}"
    return (f"seen acknowledged: {name in seen.acknowledged}, seen named: {name in seen.published}; now: "
            f"{pod_status(core, name)}; {named}; watch failures: {seen.failures or 'none'}")


def _kubelet_load(state: Path, worker: str) -> str:
    """What the worker's kubelet has on its hands, for a miss: the pods it still keeps a directory for (the
    terminating ones included), its overlong housekeeping in the last 2 minutes, the guest's load average."""
    said = ssh(state, worker, "ls /var/lib/kubelet/pods | wc -l; journalctl -u kubelet --no-pager --since -120s "
                              "| grep -c 'Housekeeping took longer'; cut -d' ' -f1-3 /proc/loadavg")
    dirs, slow, load = (said.stdout.splitlines() + ["?", "?", "?"])[:3]
    return f"{worker}: {dirs} pod dirs, {slow} overlong housekeepings in 2 min, load {load}"


def let_go(core: client.CoreV1Api, name: str, why: Callable[[], str], timeout: float = 120.0) -> float:
    """Delete the pod with GRACE_SECONDS; seconds until it is gone from the API: its kubelet tore it down."""
    core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=GRACE_SECONDS)
    return wait(f"{name} gone (torn down by its kubelet)", lambda: not core.list_namespaced_pod(
        NAMESPACE, field_selector=f"metadata.name={name}").items, timeout, 0.5, why=why)


def cpus_per_core(custom: client.CustomObjectsApi, node: str) -> int:
    """The node's CPUs per core, as numa-align publishes it (`cpusPerCore`): the smallest pinned pod it admits."""
    nrt = custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL, node)
    attributes = {a["name"]: a["value"] for a in nrt.get("attributes") or []}
    assert "cpusPerCore" in attributes, f"{node}'s object has no cpusPerCore: {sorted(attributes)}"
    return int(attributes["cpusPerCore"])


def measure(state: Path, workers: list[str], image: str, per_worker: int = 10) -> str:
    """Pinned pods made one at a time per worker (the workers side by side), each deleted once the object
    named it and the next made once it is gone (GRACE_SECONDS); returns the summary line. Asserts that every
    pod was seen admitted and published."""
    core, custom = client.CoreV1Api(api(state)), client.CustomObjectsApi(api(state))
    seen, stop = Seen(), threading.Event()
    cores = {worker: cpus_per_core(custom, worker) for worker in workers}
    pods = partial(core.list_namespaced_pod, NAMESPACE, label_selector=LABEL)
    objects = partial(custom.list_cluster_custom_object, nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL)
    watchers = [threading.Thread(target=_keep_watching, args=(name, partial(_open, lister), on, seen, stop),
                                 daemon=True)
                for name, lister, on in (("pods", pods, _pod_seen(seen)), ("objects", objects, _object_seen(seen)))]
    for thread in watchers:
        thread.start()
    time.sleep(1)  # both watches open before the first pod

    def one_pod(worker: str, name: str) -> None:
        manifest = guaranteed_pod(name, worker, image)
        manifest["metadata"]["labels"] = {LABEL: "1"}
        whole = {"cpu": str(cores[worker]), "memory": "32Mi"}  # full-pcpus-only (worker-3) admits whole cores only
        manifest["spec"]["containers"][0]["resources"] = {"requests": whole, "limits": whole}
        seen.note(seen.created, name)
        core.create_namespaced_pod(NAMESPACE, manifest)
        try:
            # both, before the pod goes: the object may name it before the kubelet's first status reaches the API
            wait(f"{name} named by {worker}'s object and acknowledged by its kubelet",
                 lambda: name in seen.published and name in seen.acknowledged, 60, 0.2,
                 why=lambda: f"{_why_missed(core, custom, seen, name, worker)}; {_kubelet_load(state, worker)}")
        except AssertionError:
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=GRACE_SECONDS)
            raise
        let_go(core, name, why=lambda: f"{pod_status(core, name)}; {_kubelet_load(state, worker)}")

    def one_worker(worker: str) -> None:
        for index in range(per_worker):
            one_pod(worker, f"fresh-{worker}-{index}")

    # the workers side by side; a worker's failure (the wait naming its pod) is the case's, not a count gone short
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        runs = [pool.submit(one_worker, worker) for worker in workers]
    stop.set()
    for run in runs:
        run.result()
    names = sorted(seen.created)
    assert len(names) == per_worker * len(workers)
    missing = [n for n in names if n not in seen.acknowledged or n not in seen.published]
    assert not missing, f"never seen acknowledged or published: {missing}"
    ahead = sum(seen.published[n] < seen.acknowledged[n] for n in names)  # the object before the kubelet's status
    admitted = [max(0.0, seen.published[n] - seen.acknowledged[n]) for n in names]
    created = [seen.published[n] - seen.created[n] for n in names]
    a50, a95, amax = summary(admitted)
    c50, c95, cmax = summary(created)
    return (f"freshness over {len(names)} pinned pods: kubelet's first status -> object names the pod p50 "
            f"{a50:.2f} s, p95 {a95:.2f} s, max {amax:.2f} s; from creation p50 {c50:.2f} s, p95 {c95:.2f} s, "
            f"max {cmax:.2f} s; {ahead} objects named their pod before its first status reached the API (0 s) "
            f"(the field's exporters: every {FIELD_DEFAULT_SECONDS} s); watch failures "
            f"{ {watch_name: len(whys) for watch_name, whys in seen.failures.items()} or 'none'}")

