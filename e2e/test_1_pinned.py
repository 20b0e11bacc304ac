"""Case 1, the NRT and the Prometheus case: a Guaranteed pod per worker x NUMA node asking for numa-align/numa-N.

The pods stay up while the node checks (testinfra), the PodResources cross-check (the inspector), the
node's NodeResourceTopology object (the NRT case) and numa-align's per-cell gauge read through Prometheus
(the Prometheus case) look at them, then they are deleted.
"""

from __future__ import annotations

import functools
import json

import pytest
from kube import PodTrouble
from nrt import judge_zone, read_nrt, summary, wait_agreeing
from numa_align.cpulist import format_cpulist, parse_cpulist
from numa_align.devices import resource_name, socket_name
from probe_pods import devices_for, pinned_pod
from prometheus import WAIT_SECONDS, gauge_summary, judge_gauge, read_pods_pinned
from results import ALL_NODES, describe_failures

from numalab.placement.verdicts import judge_pinned, memory_not_enforced

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
STATE_DIR = "/var/lib/kubelet"


@pytest.fixture(scope="module")
def pinned(cluster, workers, settings, pinned_cpus):
    """(worker, node) -> (pod name, pod as a dict or None, ProbeReport or None, trouble or None)."""
    bodies = {(w, n): pinned_pod(w, n, settings.probe_image, settings.capacity_mode, cpus=pinned_cpus[w])
              for w, nodes in workers.items() for n in nodes}
    cluster.create_pods(bodies.values())
    seen = {}
    try:
        for key, body in bodies.items():
            name = body["metadata"]["name"]
            try:
                report = cluster.wait_for_probes(name, ["probe"])["probe"]
                seen[key] = (name, cluster.pod(name), report, None)
            except PodTrouble as exc:
                seen[key] = (name, None, None, str(exc))
        yield seen
    finally:
        cluster.delete_pods(body["metadata"]["name"] for body in bodies.values())


def _partial_cores(host, cpus: frozenset[int]) -> list[str]:
    """Under full-pcpus-only a pod holds whole cores: every thread sibling of its CPUs is its own too."""
    problems = []
    for cpu in sorted(cpus):
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
        siblings = parse_cpulist(host.file(path).content_string.strip())
        if not siblings <= cpus:
            problems.append(f"cpu {cpu} without its sibling(s) {format_cpulist(siblings - cpus)}: not a whole core")
    return problems


def _checkpoint(host, name: str, problems: list[str]) -> dict | None:
    """A kubelet checkpoint file from the node, or None with the reason added to problems."""
    path = f"{STATE_DIR}/{name}"
    if not host.file(path).exists:
        problems.append(f"{path} does not exist")
        return None
    try:
        return json.loads(host.file(path).content_string)
    except json.JSONDecodeError as exc:
        problems.append(f"{path} is not JSON: {exc.msg}")
        return None


def test_pinned_pod_runs_on_its_numa_node(pinned, policies, pinned_cpus, hosts, results):
    for (worker, node), (_, pod, report, trouble) in pinned.items():
        if trouble:
            results.add(worker, node, "pinned", False, detail=trouble)
            continue
        static = policies[worker]["memoryManagerPolicy"] == "Static"
        verdict = judge_pinned(report, node, pinned_cpus[worker], memory_static=static)
        problems = list(verdict.problems)
        if pinned_cpus[worker] > 1:  # full-pcpus-only: the CPUs must be whole cores
            problems.extend(_partial_cores(hosts[worker], report.cpus))
        if pod["status"].get("qosClass") != "Guaranteed":
            problems.append(f"qosClass {pod['status'].get('qosClass')}, expected Guaranteed")
        note = memory_not_enforced(policies[worker]["memoryManagerPolicy"])
        results.add(worker, node, "pinned", not problems, verdict.cpus, verdict.mems, "; ".join(problems) or note)
    failures = results.failures("pinned")
    assert not failures, describe_failures(failures)


def test_podresources_maps_exclusive_cpus_to_the_node(pinned, workers, policies, inspect_node, cluster, results):
    for worker, nodes in workers.items():
        try:
            report = inspect_node(worker)
        except AssertionError as exc:
            for node in nodes:
                results.add(worker, node, "podresources", False, detail=str(exc))
            continue
        listed = {p["name"]: p for p in report["pods"] if p["namespace"] == cluster.namespace}
        static = policies[worker]["memoryManagerPolicy"] == "Static"
        for node in nodes:
            name, _, probe, trouble = pinned[(worker, node)]
            if trouble:
                results.add(worker, node, "podresources", False, detail="no running pod to cross-check")
                continue
            containers = {c["name"]: c for c in (listed.get(name) or {}).get("containers", [])}
            if "probe" not in containers:
                results.add(worker, node, "podresources", False, detail=f"{name} not listed by PodResources")
                continue
            c = containers["probe"]
            problems = []
            if c["exclusive_cpus"] != format_cpulist(probe.cpus):
                problems.append(f"PodResources cpus {c['exclusive_cpus'] or '-'} != seen {format_cpulist(probe.cpus)}")
            if c["cpu_numa"] != [node]:
                problems.append(f"exclusive cpus on NUMA {c['cpu_numa']}, expected [{node}]")
            if [d["resource"] for d in c["numa_align"]] != [resource_name(node)]:
                problems.append(f"numa-align devices {c['numa_align']}, expected {resource_name(node)}")
            if static and c["memory_numa"] != [node]:
                problems.append(f"memory NUMA {c['memory_numa']}, expected [{node}]")
            if c["state"] is not None and c["state"]["cpus"] != c["exclusive_cpus"]:
                problems.append(f"cpu_manager_state says {c['state']['cpus']}")
            mems = format_cpulist(c["memory_numa"])
            results.add(worker, node, "podresources", not problems, c["exclusive_cpus"], mems, "; ".join(problems))
    failures = results.failures("podresources")
    assert not failures, describe_failures(failures)


def test_node_runs_kubelet_managers_and_plugin(pinned, workers, policies, hosts, settings, results):
    for worker, nodes in workers.items():
        host = hosts[worker]
        problems = []
        if not host.process.filter(comm="kubelet"):
            problems.append("no kubelet process")
        expected = {"cpuManagerPolicy": "static", "topologyManagerPolicy": settings.expect_topology_policy,
                    "memoryManagerPolicy": settings.expect_memory_policy}
        for key, value in expected.items():
            if policies[worker][key] != value:
                problems.append(f"kubelet {key} {policies[worker][key]}, expected {value}")
        if not host.service(settings.plugin_service).is_running:
            problems.append(f"service {settings.plugin_service} is not active")
        cpu_state = _checkpoint(host, "cpu_manager_state", problems)
        if cpu_state is not None and cpu_state.get("policyName") != "static":
            problems.append(f"cpu_manager_state policyName {cpu_state.get('policyName')!r}, expected 'static'")
        memory_state = _checkpoint(host, "memory_manager_state", problems) or {}
        results.add(worker, ALL_NODES, "node-state", not problems, detail="; ".join(problems))

        for node in nodes:
            problems = []
            if not host.file(f"{DEVICE_PLUGIN_DIR}/{socket_name(node)}").is_socket:
                problems.append(f"no socket {DEVICE_PLUGIN_DIR}/{socket_name(node)}")
            _, pod, _, trouble = pinned[(worker, node)]
            mems = "-"
            if pod is None:
                problems.append(f"no running pinned pod ({trouble})")
            elif policies[worker]["memoryManagerPolicy"] == "Static":
                blocks = (memory_state.get("entries") or {}).get(pod["metadata"]["uid"], {}).get("probe") or []
                affinity = sorted({n for block in blocks for n in block.get("numaAffinity") or []})
                mems = format_cpulist(affinity)
                if affinity != [node]:
                    problems.append(f"memory_manager_state holds NUMA {affinity} for the pinned pod, expected [{node}]")
            results.add(worker, node, "node-state", not problems, mems=mems, detail="; ".join(problems))
    failures = results.failures("node-state")
    assert not failures, describe_failures(failures)


def test_nrt_counts_each_pinned_pod(pinned, workers, policies, pinned_cpus, settings, cluster, results):
    """The NRT case (named so `-k pinned_pod` keeps it): each zone shows its pinned pod's CPUs and devices taken."""
    for worker, nodes in workers.items():
        static = policies[worker]["memoryManagerPolicy"] == "Static"
        cpus = pinned_cpus[worker]
        for node in nodes:
            if pinned[(worker, node)][3]:
                results.add(worker, node, "nrt", False, detail="no running pinned pod to count")
                continue
            judge = functools.partial(judge_zone, node=node, cpus=cpus, memory_static=static,
                                      devices=devices_for(cpus, settings.capacity_mode),
                                      policy=settings.expect_topology_policy)
            nrt, problems = wait_agreeing(functools.partial(read_nrt, cluster.api, worker), judge)
            results.add(worker, node, "nrt", not problems, detail="; ".join(problems) or summary(nrt, node))
    failures = results.failures("nrt")
    assert not failures, describe_failures(failures)


def test_prometheus_shows_each_pinned_pod(pinned, workers, settings, results):
    """The Prometheus case (named so `-k pinned_pod` keeps it): numa_align_node_pods_pinned, scraped by the
    registry host's Prometheus, counts each cell's pinned pod; n/a without --prometheus-url."""
    for worker, nodes in workers.items():
        for node in nodes:
            if not settings.prometheus_url:
                results.add(worker, node, "prometheus", None, detail="no --prometheus-url given")
                continue
            if pinned[(worker, node)][3]:
                results.add(worker, node, "prometheus", False, detail="no running pinned pod to count")
                continue
            read = functools.partial(read_pods_pinned, settings.prometheus_url, worker, node)
            reading, problems = wait_agreeing(read, judge_gauge, wait=WAIT_SECONDS)
            results.add(worker, node, "prometheus", not problems,
                        detail="; ".join(problems) or gauge_summary(reading))
    failures = results.failures("prometheus")
    assert not failures, describe_failures(failures)
