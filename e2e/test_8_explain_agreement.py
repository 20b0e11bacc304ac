"""Case 8: `numalab explain` against the real kubelet, pair by pair (the corpus: explain_corpus.py).

For each pair on its worker: its fillers are created and seen in numa-align's allocations annotation; explain
runs in-process on fresh API reads for that worker (the same reads as `numalab explain --node`); the pod is
created on the worker by spec.nodeName (no scheduler in between); the kubelet's verdict is read back (a Failed
pod's reason, else its cells from the annotation, which carries PodResources' assignment); then the pod and
fillers are deleted (grace 0) and seen gone from the annotation, so the next pair is explained on the node state
the kubelet then judges. A closest- pair's row also names the kubelet's outcome without prefer-closest-numa-nodes
and fails when the kubelet gave exactly that where the option should change it (--explain-pairs closest runs only
those pairs). The workers' sequences run side by side, one thread each; a pair judged the same on every worker
runs on one of them (pair_sharing.py). Every wait is an api_outages.Deadline: the
API server restarted under the suite gives the wait its time back.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import urllib3
from closest_pairs import against_baseline, none_to_run, selected
from explain_corpus import CASE, Held, Pair, corpus, worker_shape
from kube import Cluster
from kubelet_outcome import compare, real_outcome
from kubernetes.client.rest import ApiException
from nrt import read_nrt, wait_agreeing
from numa_align.cpulist import parse_cpulist
from pair_sharing import share
from results import ALL_NODES, describe_failures

from numalab.explain.command import collect
from numalab.explain.requests import guaranteed_cpus, pod_request
from numalab.explain.source import ApiExplainSource
from numalab.explain.verdicts import explain
from numalab.top.nrt import Allocation, parse_nrt
from numalab.top.source import TopError

ADMISSION_SECONDS = 120.0
"""How long the kubelet may take to admit or reject a pair's pod. Usually seconds; in run wi (beside the other
tests) worker-3's kubelet had said nothing of exhausted-all's pod after 60 s, and the pair failed as
undecided. A late verdict is still the kubelet's verdict; a pod still undecided is shown with its events."""
ANNOTATION_SECONDS = 20.0
CLEARED_SECONDS = 60.0
"""How long a pair's deleted pods may stay in numa-align's annotation before the next pair runs anyway: the next
pair is explained on that state, so it waits for the kubelet to let them go (r5: over 20 s on a loaded host, and
the next pair was then explained on memory the kubelet had already freed)."""
SETTLE_SECONDS = 3.0
"""A pod that should hold nothing exclusive: how long an allocation the kubelet made anyway is looked for."""
POLL_SECONDS = 1.0
"""How often a pair's pods are read while the kubelet decides or deletes them: a pair is a few such waits, and
the suite's 2 s (kube.POLL_SECONDS) added about a second to each."""


def cell_cpus(host: Any, nrt: Mapping[str, Any]) -> dict[int, frozenset[int]]:
    """Each NUMA cell's CPU ids from the worker's sysfs (the NRT object counts CPUs, it does not name them)."""
    ids = [zone.numa_id for zone in parse_nrt(nrt).zones if zone.numa_id is not None]
    return {n: parse_cpulist(host.file(f"/sys/devices/system/node/node{n}/cpulist").content_string.strip())
            for n in ids}


class PairRunner:
    """One worker's pairs, one at a time, through the suite's Cluster and an explain source on its client."""

    def __init__(self, cluster: Cluster, source: ApiExplainSource, worker: str,
                 cells: Mapping[int, frozenset[int]]) -> None:
        self.cluster, self.source, self.worker, self.cells = cluster, source, worker, cells

    def key(self, name: str) -> str:
        return f"{self.cluster.namespace}/{name}"

    def read(self) -> dict[str, Any] | None:
        return read_nrt(self.cluster.api, self.worker)

    def wait_listed(self, present: Iterable[str], absent: Iterable[str], seconds: float = ANNOTATION_SECONDS,
                    cpus: Mapping[str, int] | None = None) -> list[str]:
        """Wait until the annotation names every `present` pod (with `cpus[name]` exclusive CPUs where given) and
        none of `absent`; what is still wrong."""
        present, absent = [self.key(n) for n in present], [self.key(n) for n in absent]
        held = {self.key(n): count for n, count in (cpus or {}).items()}

        def judge(obj: dict[str, Any] | None) -> list[str]:
            listed = (parse_nrt(obj).allocations if obj else None) or {}
            return ([f"{k} not listed" for k in present if k not in listed]
                    + [f"{k} listed with {len(listed[k].cpus)} of its {held[k]} CPUs" for k in present
                       if k in listed and k in held and len(listed[k].cpus) != held[k]]
                    + [f"{k} still listed" for k in absent if k in listed])

        return wait_agreeing(self.read, judge, seconds, every=1.0)[1]

    def settled(self, name: str, holds: bool, full: Held | None = None) -> tuple[Mapping[str, Allocation] | None, str]:
        """The annotation once it names the admitted pod with all of `full` and the same entry twice (a read taken
        during admission may show part of it: r7 read cpu without memory twice); for a pod that holds nothing,
        after SETTLE_SECONDS. Past ANNOTATION_SECONDS the last read is compared, and the row says what it lacked."""
        if not holds:
            time.sleep(SETTLE_SECONDS)
            obj = self.read()
            return (parse_nrt(obj).allocations if obj else None), ""
        seen: list[Allocation | None] = []

        def judge(obj: dict[str, Any] | None) -> list[str]:
            seen.append(((parse_nrt(obj).allocations if obj else None) or {}).get(self.key(name)))
            if seen[-1] is None:
                return ["not listed"]
            if full is not None and (lacks := full.missing(seen[-1])):
                return [f"listed with {', '.join(lacks)}"]
            return [] if len(seen) > 1 and seen[-2] == seen[-1] else ["listed, not yet read twice alike"]

        obj, problems = wait_agreeing(self.read, judge, ANNOTATION_SECONDS, every=1.0)
        why = f" (numa-align's annotation after {ANNOTATION_SECONDS:.0f}s: {problems[0]})" if problems else ""
        return (parse_nrt(obj).allocations if obj else None), why

    def predict(self, pair: Pair) -> dict[str, Any]:
        """explain's verdict for this worker, on the cluster as it is now."""
        try:
            configs, (nrts, nodes, pods, leases) = collect(SimpleNamespace(node=self.worker), self.source)
        except TopError as exc:
            return {"verdict": "no-data", "reason": f"explain could not read the cluster: {exc}"}
        (verdict,) = explain(pod_request(pair.pod, f"pair {pair.name}"), nrts, nodes, pods, leases,
                             datetime.datetime.now(datetime.UTC), configs, self.worker)
        return verdict.as_dict()

    def decided(self, name: str) -> dict[str, Any]:
        """The pod once the kubelet admitted or rejected it, or as it is after ADMISSION_SECONDS."""
        self.cluster.wait_until(name, lambda pod: (None if real_outcome(pod, None, {}).verdict == "undecided"
                                                   else True, "decided"), timeout=ADMISSION_SECONDS,
                                 every=POLL_SECONDS)
        return self.cluster.pod(name)

    def judge(self, pair: Pair, created: list[str]) -> tuple[bool, str]:
        fillers = [f["metadata"]["name"] for f in pair.fillers]
        created += self.cluster.create_pods(pair.fillers)
        for name in fillers:
            seen = real_outcome(self.decided(name), None, {})
            if seen.verdict != "admitted":
                return False, f"filler {name} not admitted ({seen.verdict} {seen.reason}): the pair cannot run"
        # with all their CPUs: the kubelet lists an admitted pod in PodResources while it is still allocating
        # (devices first), and an object written then names the filler without its CPUs (r6: explain then saw a
        # free CPU and said OutOfcpu where the kubelet said TopologyAffinityError)
        if problems := self.wait_listed(fillers, (), cpus={f["metadata"]["name"]: exclusive_cpus(f)
                                                           for f in pair.fillers}):
            return False, f"fillers not in numa-align's annotation after {ANNOTATION_SECONDS:.0f}s: {problems}"
        predicted = self.predict(pair)
        name = pair.pod["metadata"]["name"]
        created += self.cluster.create_pods([pair.pod])
        pod = self.decided(name)
        allocations, why = None, ""
        if real_outcome(pod, None, {}).verdict == "admitted":
            allocations, why = self.settled(name, pair.holds, pair.full)
        real = real_outcome(pod, allocations, self.cells)
        ok, detail = compare(predicted, real)
        if real.verdict == "undecided":
            detail += f" after {ADMISSION_SECONDS:.0f} s; {self.cluster.explain(name)}"
        if pair.baseline is None:
            return ok, detail + why
        unlike, note = against_baseline(pair.expect, pair.baseline, real, pair.baseline_is)  # did it matter?
        return ok and unlike, detail + why + note

    def run(self, pair: Pair) -> tuple[Pair, bool, str]:
        """Run one pair and clean up after it, whatever happened."""
        created: list[str] = []
        try:
            ok, detail = self.judge(pair, created)
        except (AssertionError, ApiException, urllib3.exceptions.HTTPError) as exc:
            ok, detail = False, f"could not run: {_short(exc)}"
        try:
            self.cluster.delete_pods(created, every=POLL_SECONDS)
        except (AssertionError, ApiException, urllib3.exceptions.HTTPError) as exc:
            detail += f"; deleting its pods failed: {_short(exc)}"
        if left := self.wait_listed((), created, CLEARED_SECONDS):
            detail += f"; after deletion numa-align still lists {left} (the next pair may see them)"
        return pair, ok, detail


def exclusive_cpus(body: Mapping[str, Any]) -> int:
    """The exclusive CPUs a filler holds, as the CPU Manager counts them (explain's reading of the pod)."""
    request = pod_request(body, body["metadata"]["name"])
    return sum(guaranteed_cpus(request, c) for c in request.containers)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400]


def test_explain_agrees_with_the_kubelet(cluster, workers, settings, pinned_cpus, hosts, results, capsys):
    source = ApiExplainSource.from_client(cluster.api, str(settings.kubeconfig))
    plans: list[tuple[PairRunner, list[Pair]]] = []
    for worker in workers:
        nrt = read_nrt(cluster.api, worker)
        if nrt is None:
            results.add(worker, ALL_NODES, f"{CASE}:corpus", False, detail="no NodeResourceTopology object")
            continue
        shape = worker_shape(worker, nrt, cluster.node(worker), cluster.configz(worker)["kubeletconfig"],
                             pinned_cpus[worker], settings.capacity_mode)
        plans.append((PairRunner(cluster, source, worker, cell_cpus(hosts[worker], nrt)),
                      selected(corpus(shape, settings.probe_image), settings.explain_pairs)))
    if settings.explain_pairs == "all":  # a pair judged the same on every worker runs on one of them
        plans = list(zip([runner for runner, _ in plans], share([pairs for _, pairs in plans]), strict=True))
    if missing := none_to_run((pairs for _, pairs in plans), settings.explain_pairs):
        results.add(ALL_NODES, ALL_NODES, f"{CASE}:closest", False, detail=missing)
    with ThreadPoolExecutor(max_workers=max(1, len(plans))) as pool:
        done = list(pool.map(lambda plan: [plan[0].run(pair) for pair in plan[1]], plans))
    for rows in done:
        for pair, ok, detail in rows:
            results.add(pair.worker, ALL_NODES, f"{CASE}:{pair.name}", ok, detail=detail)
    rows = [row for row in results.rows if row.case.startswith(f"{CASE}:")]
    with capsys.disabled():  # shown in every run, not only a failed one
        print(f"\nexplain vs kubelet: {sum(row.ok is True for row in rows)}/{len(rows)} pairs agree")
    failures = results.failures(CASE)
    assert not failures, describe_failures(failures)
