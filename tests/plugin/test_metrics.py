"""The /metrics endpoint of a running plugin, read over HTTP like Prometheus does."""

from __future__ import annotations

import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.plugin.conftest import running_plugin
from tests.plugin.test_protocol import TWO_NODES, resources


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
