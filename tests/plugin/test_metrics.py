"""The /metrics endpoint of a running plugin, read over HTTP like Prometheus does."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import grpc
import pytest
from numa_align.metrics import Metrics
from numa_align.publishing import NrtPublisher
from numa_align.settings import Settings
from numa_align.sysfs import read_sysfs
from prometheus_client.parser import text_string_to_metric_families

from tests.fakesysfs import GIB_KIB
from tests.kubeletdouble.kubelet import KubeletDouble
from tests.kubeletdouble.podresources import ContainerAlloc, Devices, Memory, PodAlloc, serve_pod_resources
from tests.plugin.conftest import running_plugin
from tests.plugin.test_protocol import TWO_NODES, resources

GIB = 1 << 30


def scrape(address: tuple[str, int]) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_report_nodes_devices_registrations_and_allocations(make_sysfs, kubelet, base_settings):
    sysfs = make_sysfs(TWO_NODES, memory_kib={0: 1024, 2: 4096})
    with running_plugin(base_settings, sysfs_root=sysfs, metrics_addr=("127.0.0.1", 0)) as plugin:
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-2")
        client.admit(1)
        client.allocate(["numa-2-0"], ["numa-2-1"])
        with pytest.raises(grpc.RpcError):
            client.allocate(["numa-0-0"])
        m = scrape(plugin.metrics_address)
    assert m[("numa_node_cpus_count", (("node", "0"),))] == 2
    assert m[("numa_node_memory_bytes", (("node", "2"),))] == 4096 * 1024
    assert m[("numa_align_devices", (("health", "Healthy"), ("resource", "numa-align/numa-0")))] == 3
    assert m[("numa_align_devices", (("health", "Unhealthy"), ("resource", "numa-align/numa-0")))] == 0
    assert m[("numa_align_registered", (("resource", "numa-align/numa-2"),))] == 1
    assert m[("numa_align_registrations_total", ())] == 2
    assert m[("numa_align_allocations_total", (("resource", "numa-align/numa-2"),))] == 3
    assert m[("numa_align_allocations_total", (("resource", "numa-align/numa-0"),))] == 0
    assert m[("numa_align_allocate_errors_total", ())] == 1


def test_an_empty_metrics_addr_serves_no_metrics(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES), metrics_addr=None) as plugin:
        assert kubelet.wait_connected(resources(TWO_NODES))
        assert plugin.metrics_address is None


def test_per_node_gauges_from_the_pod_resources_poll(make_sysfs, socket_dir):
    """Node 0 holds CPUs 2-3 and 1 GiB of `pinned`; `wide` holds CPU 4 and 2 GiB over both nodes (counted on each);
    `device` holds a numa-align/numa-1 device only; a vendor device and a pod holding nothing pin nothing."""
    host = read_sysfs(make_sysfs({0: "0-3", 1: "4-7"}, memory_kib=4 * GIB_KIB))
    pods = [
        PodAlloc("numa", "pinned", [ContainerAlloc("app", cpus=[2, 3], memory=[Memory("memory", GIB, [0])])]),
        PodAlloc("numa", "wide", [ContainerAlloc("app", cpus=[4], memory=[Memory("memory", 2 * GIB, [0, 1])])]),
        PodAlloc("numa", "device", [ContainerAlloc("app", devices=[Devices("numa-align/numa-1", ["numa-1-0"], [1])])]),
        PodAlloc("numa", "nic", [ContainerAlloc("app", devices=[Devices("vendor/nic", ["a"], [0])])]),
        PodAlloc("default", "idle", [ContainerAlloc("app")]),
    ]
    metrics = Metrics()
    settings = Settings(pod_resources_socket=socket_dir / "pr.sock")
    with serve_pod_resources(socket_dir / "pr.sock") as double:
        double.set_allocatable(range(1, 8), memory=[Memory("memory", 3 * GIB, [0]), Memory("memory", 4 * GIB, [1])])
        double.set_pods(pods)
        NrtPublisher(settings, lambda: host, metrics=metrics).poll_once()

    def value(name: str, node: int) -> float | None:
        return metrics.registry.get_sample_value(name, {"node": str(node)})

    assert [value("numa_align_node_cpus_allocatable", n) for n in (0, 1)] == [3, 4]
    assert [value("numa_align_node_cpus_allocated", n) for n in (0, 1)] == [2, 1]
    assert [value("numa_align_node_memory_allocatable_bytes", n) for n in (0, 1)] == [3 * GIB, 4 * GIB]
    assert [value("numa_align_node_memory_allocated_bytes", n) for n in (0, 1)] == [3 * GIB, 2 * GIB]
    assert [value("numa_align_node_pods_pinned", n) for n in (0, 1)] == [2, 2]


def ready(address: tuple[str, int]) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/readyz", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readyz_is_ok_only_while_every_resource_is_registered_with_the_kubelet(make_sysfs, socket_dir, base_settings):
    """The DaemonSet's readiness probe: 503 before the kubelet is there, 200 once both resources registered,
    503 again once the kubelet is gone."""
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES), metrics_addr=("127.0.0.1", 0)) as plugin:
        status, text = ready(plugin.metrics_address)
        assert status == 503 and "registered" in text, text  # no kubelet yet: nothing registered
        double = KubeletDouble(socket_dir)
        double.start()
        try:
            assert double.wait_connected(resources(TWO_NODES))
            deadline = time.monotonic() + 10
            while ready(plugin.metrics_address)[0] != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            status, text = ready(plugin.metrics_address)
            assert status == 200, text
            assert text.strip() == "registered with the kubelet: numa-align/numa-0, numa-align/numa-2"
        finally:
            double.stop()
        deadline = time.monotonic() + 10  # the kubelet gone: not ready again until it is back
        while ready(plugin.metrics_address)[0] != 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready(plugin.metrics_address)[0] == 503


def test_readiness_names_the_resources_not_registered() -> None:
    metrics = Metrics()
    metrics.set_registered("numa-align/numa-0", True)
    metrics.set_registered("numa-align/numa-1", False)
    assert metrics.readiness() == (False, "not registered with the kubelet: numa-align/numa-1")
