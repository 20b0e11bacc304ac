"""numa-align's API traffic per node over a simulated idle hour: NRT object writes (goal 0), Lease writes,
reads and connections; then the same hour with one pod stuck Pending. Prints figures, asserts nothing.

The NrtPublisher runs as in the plugin (poll every 2 s) against the kubelet's PodResources double on a unix
socket and the fake API server of tests/plugin over HTTP on 127.0.0.1, its clock a fake one advanced 2 s
per poll, so an hour takes seconds. "Before" is the rule numa-align had until issue 26, computed: every
object rewritten every 60 s whatever changed (REFRESH), one request and one TLS connection per call.
Usage: python bench/nrt_api_bench.py [--hours N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kubelet double, fake sysfs and fake API server live in the tests package

from numa_align.kubeapi import KubeClient  # noqa: E402
from numa_align.kubeconfig import ClusterConfig  # noqa: E402
from numa_align.publishing import NrtPublisher  # noqa: E402
from numa_align.settings import Settings  # noqa: E402
from numa_align.sysfs import read_sysfs  # noqa: E402

from tests.fakesysfs import GIB_KIB, write_node_tree  # noqa: E402
from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, serve_pod_resources  # noqa: E402
from tests.plugin.fakekube import FakeKube, serve_kube  # noqa: E402

NODE = "worker-1"
POLL = 2.0
OLD_REFRESH = 60.0
"""The rewrite period numa-align had before (publishing.REFRESH)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def one_hour(stuck: bool, hours: float) -> dict[str, float]:
    """Traffic per hour after the first poll (which creates the object and the Lease)."""
    work = Path(tempfile.mkdtemp(prefix="nrt-bench-", dir="/tmp"))
    try:
        host = read_sysfs(write_node_tree(work / "sys", {0: "0-3", 1: "4-7"}, memory_kib=4 * GIB_KIB))
        fake = FakeKube()
        fake.add_node(NODE)
        pods = [PodAlloc("default", "web", [ContainerAlloc("app")]),
                PodAlloc("numa", "pinned", [ContainerAlloc("app", cpus=[2, 3])])]
        for pod in pods:
            fake.set_pod(pod.namespace, pod.name, NODE)
        if stuck:
            pods.append(PodAlloc("numa", "stuck", [ContainerAlloc("app", cpus=[5])]))
            fake.set_pod("numa", "stuck", NODE, phase="Pending")
        with serve_pod_resources(work / "pr.sock") as kubelet, serve_kube(fake) as url:
            kubelet.set_allocatable(range(1, 8))
            kubelet.set_pods(pods)
            clock = Clock()
            settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=work / "pr.sock", metrics_addr=None,
                                poll_interval=POLL)
            publisher = NrtPublisher(settings, lambda: host, KubeClient(ClusterConfig(server=url, source="bench")),
                                     clock=clock)
            publisher.poll_once()
            start_writes, start_leases, start_seen = len(fake.writes), len(fake.lease_writes), len(fake.seen)
            for _ in range(int(hours * 3600 / POLL)):
                clock.now += POLL
                publisher.poll_once()
            seen = fake.seen[start_seen:]
            return {
                "object writes": (len(fake.writes) - start_writes) / hours,
                "lease writes": (len(fake.lease_writes) - start_leases) / hours,
                "object reads": sum(m == "GET" and "noderesourcetopologies" in p for m, p, _ in seen) / hours,
                "pod lists": sum(p.startswith("/api/v1/pods") for _m, p, _ in seen) / hours,
                "requests": len(seen) / hours,
                "connections": fake.connections,
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0)
    args = parser.parse_args()
    before = 3600 / OLD_REFRESH
    print(f"API traffic of one node's numa-align per idle hour (poll every {POLL:g} s, {args.hours:g} h simulated)")
    print(f"  before (computed): {before:.0f} object writes/h (one every {OLD_REFRESH:g} s, each an etcd write and "
          f"an event for every NRT informer), {before:.0f} requests/h, {before:.0f} TLS connections/h")
    for stuck in (False, True):
        figures = one_hour(stuck, args.hours)
        label = "after, one pod stuck Pending" if stuck else "after, idle"
        print(f"  {label}: {figures['object writes']:.0f} object writes/h (goal 0), "
              f"{figures['lease writes']:.0f} Lease writes/h, {figures['object reads']:.0f} object reads/h "
              f"(watch cache), {figures['pod lists']:.0f} pod lists/h, {figures['requests']:.0f} requests/h, "
              f"{figures['connections']:.0f} connection(s) in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
