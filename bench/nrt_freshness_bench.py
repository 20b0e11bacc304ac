"""How fresh numa-align keeps its node's NodeResourceTopology object: over N simulated admissions, the time from
the kubelet's checkpoint renamed into place to the API server receiving the object's write, with the checkpoint
watch and with the poll alone (every 2 s), beside the field's 60 s default. Prints figures, asserts nothing.

The NrtPublisher runs as in the plugin (its own thread, real clock, at most one write a second) against the
kubelet's PodResources double on a unix socket and the fake API server of tests/plugin over HTTP on 127.0.0.1.
An admission is what the kubelet does: its PodResources answer changes (a pinned pod, on the other cell than the
one before), then it renames its cpu_manager_state into its root directory. "Poll only" renames it into a
directory numa-align does not watch. Admissions are spaced by the one-write-a-second limit plus a random part
of the poll interval, so the poll's phase is random as in a cluster.
Usage: python bench/nrt_freshness_bench.py [--admissions N]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kubelet double, fake sysfs and fake API server live in the tests package

from numa_align.kubeapi import KubeClient  # noqa: E402
from numa_align.kubeconfig import ClusterConfig  # noqa: E402
from numa_align.kubelet_sources import CPU_STATE  # noqa: E402
from numa_align.metrics import Metrics  # noqa: E402
from numa_align.nrt_writer import MIN_INTERVAL  # noqa: E402
from numa_align.publishing import NrtPublisher  # noqa: E402
from numa_align.settings import Settings  # noqa: E402
from numa_align.sysfs import read_sysfs  # noqa: E402

from numalab.percentiles import percentile  # noqa: E402
from tests.fakesysfs import GIB_KIB, write_node_tree  # noqa: E402
from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, serve_pod_resources  # noqa: E402
from tests.plugin.fakecgroup import write_cgroup_root  # noqa: E402
from tests.plugin.fakekube import FakeKube, serve_kube  # noqa: E402

NODE = "worker-1"
POLL = 2.0
FIELD_DEFAULT = 60.0
"""Seconds between the field's topology exporters' updates by default (nfd-topology-updater, RTE)."""
IDLE = PodAlloc("default", "idle", [ContainerAlloc("app")])
LATENCY = "numa_align_nrt_update_latency_seconds"
CELL_CPUS = ([2, 3], [5, 6])
"""An admission's CPUs, on cell 0 and cell 1 in turn: each changes the object's `available`."""


class TimedKube(FakeKube):
    """The fake API server, noting when each NodeResourceTopology write arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.written_at: list[float] = []
        self.written = threading.Event()

    def _store(self, name: str, body: dict[str, Any], verb: str, kept: dict[str, str]) -> tuple[int, Any]:
        answer = super()._store(name, body, verb, kept)
        self.written_at.append(time.monotonic())
        self.written.set()
        return answer


def rename_checkpoint(directory: Path, n: int) -> None:
    temp = directory / f".{CPU_STATE}.tmp"
    temp.write_text(f'{{"policyName":"static","entries":{{"pod-{n}":{{}}}}}}')
    os.rename(temp, directory / CPU_STATE)


def admissions(watched: bool, count: int, rng: random.Random) -> tuple[list[float], int, float]:
    """Seconds from each rename to the write received; the writes for the admissions; the mean of numa-align's
    histogram over them (from the event seen, or the poll's start without one: it cannot see a poll's wait)."""
    work = Path(tempfile.mkdtemp(prefix="nrt-fresh-", dir="/tmp"))
    try:
        kubelet_dir, unwatched = work / "kubelet", work / "elsewhere"
        (kubelet_dir / "pod-resources").mkdir(parents=True)
        unwatched.mkdir()
        host = read_sysfs(write_node_tree(work / "sys", {0: "0-3", 1: "4-7"}, memory_kib=4 * GIB_KIB))
        fake = TimedKube()
        fake.add_node(NODE)
        fake.set_pod(IDLE.namespace, IDLE.name, NODE)
        socket = kubelet_dir / "pod-resources" / "kubelet.sock"
        with serve_pod_resources(socket) as kubelet, serve_kube(fake) as url:
            kubelet.set_allocatable(range(1, 8))
            kubelet.set_pods([IDLE])
            settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket, metrics_addr=None,
                                poll_interval=POLL, cgroup_root=write_cgroup_root(work / "cgroup"))
            metrics = Metrics()
            publisher = NrtPublisher(settings, lambda: host, KubeClient(ClusterConfig(server=url, source="bench")),
                                     metrics)
            publisher.start()
            try:
                if not fake.written.wait(30):
                    raise RuntimeError(f"no first write: {publisher.status}")
                before, latencies = len(fake.written_at), []
                histogram = (metrics.registry.get_sample_value(f"{LATENCY}_sum"),
                             metrics.registry.get_sample_value(f"{LATENCY}_count"))
                for n in range(count):
                    time.sleep(MIN_INTERVAL + rng.uniform(0, POLL))
                    fake.written.clear()
                    pod = PodAlloc("numa", f"pinned-{n}", [ContainerAlloc("app", cpus=CELL_CPUS[n % 2])])
                    fake.set_pod(pod.namespace, pod.name, NODE)
                    kubelet.set_pods([IDLE, pod])
                    start = time.monotonic()
                    rename_checkpoint(kubelet_dir if watched else unwatched, n)
                    if not fake.written.wait(POLL * 5 + 10):
                        raise RuntimeError(f"admission {n} never written: {publisher.status}")
                    latencies.append(fake.written_at[-1] - start)
                observed = metrics.registry.get_sample_value(f"{LATENCY}_sum") - histogram[0]
                counted = metrics.registry.get_sample_value(f"{LATENCY}_count") - histogram[1]
                return latencies, len(fake.written_at) - before, observed / max(counted, 1.0)
            finally:
                publisher.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admissions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"NodeResourceTopology freshness over {args.admissions} simulated admissions "
          f"(checkpoint renamed -> the API server receives the write)")
    for watched, label in ((True, "checkpoint watch + poll"), (False, f"poll only (every {POLL:g} s)")):
        latencies, writes, mean = admissions(watched, args.admissions, rng)
        ms = [1000 * value for value in latencies]
        print(f"  {label}: p50 {percentile(ms, 50):.0f} ms, p95 {percentile(ms, 95):.0f} ms, max {max(ms):.0f} ms "
              f"(mean {statistics.mean(ms):.0f} ms); {writes} writes for {args.admissions} admissions; "
              f"numa-align's own histogram: mean {1000 * mean:.0f} ms")
    print(f"  the field's default (topology exporters): an update every {FIELD_DEFAULT:g} s, so up to "
          f"{FIELD_DEFAULT:g} s (about {FIELD_DEFAULT / 2:g} s on average)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
