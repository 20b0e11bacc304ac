"""Benchmark of the numa-align device plugin; prints figures and their ratio to the goals (nothing asserted).

1. Allocate latency (p50/p99) over the plugin's unix socket, against an empty unary gRPC call to a
   trivial server on the same kind of socket (goal: Allocate <= 1.5x the empty call).
2. Re-registration time: from kubelet.sock being bound again to the last Register of the plugin's
   resources arriving (goal: median < 300 ms).
3. RSS of the plugin process serving 8 NUMA nodes x 100 devices, registered, streams open (goal < 60 MiB).

The plugin runs as its own process (`python -m numa_align`), like on a node; the kubelet is the test
double of tests/kubeletdouble. Usage: python bench/plugin_bench.py [--calls N] [--restarts N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kubelet double and fake sysfs live in the tests package

import grpc  # noqa: E402
from numa_align.api import deviceplugin_v1beta1_pb2 as api  # noqa: E402
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc  # noqa: E402

from numalab.percentiles import percentile  # noqa: E402
from tests.fakesysfs import write_node_tree  # noqa: E402
from tests.kubeletdouble import KubeletDouble  # noqa: E402

MIB = 1024 * 1024
EMPTY_METHOD = "/bench.Empty/Call"


def serve_empty(socket_path: str) -> None:
    """The baseline server: one unary method that returns empty bytes, no (de)serialization."""
    from concurrent.futures import ThreadPoolExecutor

    handler = grpc.method_handlers_generic_handler(
        "bench.Empty", {"Call": grpc.unary_unary_rpc_method_handler(lambda request, context: b"")}
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{socket_path}")
    server.start()
    server.wait_for_termination()


@contextmanager
def workspace(cells: dict[int, str]) -> Iterator[tuple[Path, Path]]:
    """A socket directory under /tmp (short paths) and a fake sysfs with `cells`."""
    socket_dir = Path(tempfile.mkdtemp(prefix="nab-", dir="/tmp"))
    sysfs_root = Path(tempfile.mkdtemp(prefix="nab-sys-"))
    try:
        yield socket_dir, write_node_tree(sysfs_root, cells)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
        shutil.rmtree(sysfs_root, ignore_errors=True)


@contextmanager
def plugin_process(socket_dir: Path, sysfs: Path, capacity: int) -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMA_")} | {
        "NUMA_SOCKET_DIR": str(socket_dir), "NUMA_SYSFS_ROOT": str(sysfs), "NUMA_CAPACITY": str(capacity),
        "NUMA_METRICS_ADDR": "127.0.0.1:0", "NUMA_LOG_LEVEL": "error",
    }
    process = subprocess.Popen([sys.executable, "-m", "numa_align", "serve"], env=env)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)


def time_calls(call: Callable[[], object], count: int, warmup: int = 200) -> list[float]:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def bench_allocate(calls: int) -> None:
    cells = {0: "0-1", 1: "2-3"}
    with workspace(cells) as (socket_dir, sysfs):
        kubelet = KubeletDouble(socket_dir)
        kubelet.start()
        baseline_socket = socket_dir / "empty.sock"
        baseline = subprocess.Popen([sys.executable, __file__, "--serve-empty", str(baseline_socket)])
        try:
            with plugin_process(socket_dir, sysfs, capacity=100):
                if not kubelet.wait_connected(["numa-align/numa-0", "numa-align/numa-1"], timeout=30):
                    raise SystemExit(f"plugin did not register: {kubelet.errors}")
                with grpc.insecure_channel(f"unix:{socket_dir / 'numa-1.sock'}") as plugin_channel, \
                        grpc.insecure_channel(f"unix:{baseline_socket}") as empty_channel:
                    stub = api_grpc.DevicePluginStub(plugin_channel)
                    container = api.ContainerAllocateRequest(devices_ids=["numa-1-7"])
                    request = api.AllocateRequest(container_requests=[container])
                    empty = empty_channel.unary_unary(EMPTY_METHOD)
                    empty(b"", wait_for_ready=True, timeout=30)
                    # interleave rounds so drift on a shared machine hits both sides alike
                    allocate, baseline_samples = [], []
                    for _ in range(5):
                        allocate += time_calls(lambda: stub.Allocate(request, timeout=10), calls // 5)
                        baseline_samples += time_calls(lambda: empty(b"", timeout=10), calls // 5)
                    response = stub.Allocate(request, timeout=10)
                    assert dict(response.container_responses[0].envs) == {"NUMA_NODE": "1"}
        finally:
            baseline.terminate()
            baseline.wait(30)
            kubelet.stop()
    a50, a99 = percentile(allocate, 50), percentile(allocate, 99)
    e50, e99 = percentile(baseline_samples, 50), percentile(baseline_samples, 99)
    print(f"Allocate (1 container, 1 device), {len(allocate)} calls over a unix socket:")
    print(f"  Allocate    p50 {a50 * 1e6:7.0f} us   p99 {a99 * 1e6:7.0f} us")
    print(f"  empty unary p50 {e50 * 1e6:7.0f} us   p99 {e99 * 1e6:7.0f} us")
    print(f"  ratio       p50 {a50 / e50:7.2f} x    p99 {a99 / e99:7.2f} x    (goal <= 1.5 x)")


def bench_reregistration(restarts: int) -> None:
    cells = {0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"}
    names = [f"numa-align/numa-{n}" for n in cells]
    with workspace(cells) as (socket_dir, sysfs):
        kubelet = KubeletDouble(socket_dir)
        kubelet.start()
        try:
            with plugin_process(socket_dir, sysfs, capacity=100):
                if not kubelet.wait_connected(names, timeout=30):
                    raise SystemExit(f"plugin did not register: {kubelet.errors}")
                registered, connected = [], []
                for run in range(1, restarts + 1):
                    kubelet.restart()
                    if not kubelet.wait_connected(names, generation=run, timeout=30):
                        raise SystemExit(f"restart {run}: not re-registered: {kubelet.errors}")
                    done = time.monotonic()
                    last = max(kubelet.registered_at[(run, name)] for name in names)
                    registered.append(last - kubelet.started_at)
                    connected.append(done - kubelet.started_at)
        finally:
            kubelet.stop()
    median = statistics.median(registered)
    print(f"Re-registration after kubelet.sock is recreated, {restarts} restarts, {len(names)} resources:")
    print(f"  last Register   median {median * 1e3:6.1f} ms   max {max(registered) * 1e3:6.1f} ms")
    print(f"  all streams up  median {statistics.median(connected) * 1e3:6.1f} ms   (kubelet double's side)")
    print(f"  ratio to goal   {median / 0.300:6.2f}   (goal < 300 ms median)")


def bench_rss() -> None:
    cells = {node: f"{4 * node}-{4 * node + 3}" for node in range(8)}
    names = [f"numa-align/numa-{n}" for n in cells]
    with workspace(cells) as (socket_dir, sysfs):
        kubelet = KubeletDouble(socket_dir)
        kubelet.start()
        try:
            with plugin_process(socket_dir, sysfs, capacity=100) as process:
                if not kubelet.wait_connected(names, timeout=30):
                    raise SystemExit(f"plugin did not register: {kubelet.errors}")
                for name in names:
                    for _ in range(20):
                        kubelet.client(name).admit(1)
                    assert len(kubelet.client(name).devices) == 100
                time.sleep(1.0)
                status = Path(f"/proc/{process.pid}/status").read_text()
        finally:
            kubelet.stop()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) * 1024
    peak = int(fields["VmHWM"].split()[0]) * 1024
    print(f"RSS of the plugin with {len(cells)} nodes x 100 devices, registered, streams open:")
    print(f"  VmRSS {rss / MIB:5.1f} MiB   VmHWM {peak / MIB:5.1f} MiB   threads {fields['Threads'].strip()}")
    print(f"  ratio to goal {rss / (60 * MIB):5.2f}   (goal < 60 MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="Allocate and empty calls each (default 5000)")
    parser.add_argument("--restarts", type=int, default=30, help="kubelet restarts (default 30)")
    parser.add_argument("--serve-empty", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_empty:
        serve_empty(args.serve_empty)
        return
    bench_allocate(args.calls)
    bench_reregistration(args.restarts)
    bench_rss()


if __name__ == "__main__":
    main()
