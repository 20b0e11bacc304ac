"""The plugin against the kubelet double, over real unix sockets: registration, devices, allocation."""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time

import grpc
import pytest
from numa_align.devices import resource_name
from numa_align.running import BIND_RETRY_FIRST, BIND_RETRY_MAX, Backoff
from numa_align.serving import BindError, Endpoint, stop_endpoints

from tests.kubeletdouble import KubeletDouble
from tests.plugin.conftest import running_plugin

TWO_NODES = {0: "0-1", 2: "2-3"}
FOUR_NODES = {0: "0-1", 1: "2-3", 3: "4-5", 6: "6-7"}


def resources(cells) -> list[str]:
    return [resource_name(node) for node in sorted(cells)]


@pytest.mark.parametrize("cells", [TWO_NODES, FOUR_NODES], ids=["2-nodes-0,2", "4-nodes-0,1,3,6"])
def test_every_node_registers_with_its_own_socket_and_topology(cells, make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(cells)):
        assert kubelet.wait_connected(resources(cells))
        requests = {request.resource_name: request for _gen, request in kubelet.registrations}
        assert sorted(requests) == resources(cells)
        for node in cells:
            request = requests[resource_name(node)]
            assert request.version == "v1beta1"
            assert request.endpoint == f"numa-{node}.sock"
            assert request.options.get_preferred_allocation_available
            assert not request.options.pre_start_required
            client = kubelet.client(resource_name(node))
            assert client.options.get_preferred_allocation_available
            devices = client.devices
            assert [d.ID for d in devices] == [f"numa-{node}-{i}" for i in range(3)]
            assert all(d.health == "Healthy" for d in devices)
            assert all([n.ID for n in d.topology.nodes] == [node] for d in devices)
        all_ids = [d.ID for node in cells for d in kubelet.client(resource_name(node)).devices]
        assert len(set(all_ids)) == len(all_ids) and max(map(len, all_ids)) <= 63


def test_a_host_with_one_node_still_serves_numa_0(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs({0: "0-3"}), capacity=100):
        assert kubelet.wait_connected(["numa-align/numa-0"])
        assert len(kubelet.client("numa-align/numa-0").devices) == 100


def test_allocate_injects_numa_node_once_per_container(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-2")
        assert client.admit(2) == {"NUMA_NODE": "2"}
        responses = client.allocate(["numa-2-0"], ["numa-2-1", "numa-2-2"])
        assert [dict(r.envs) for r in responses] == [{"NUMA_NODE": "2"}, {"NUMA_NODE": "2"}]
        assert kubelet.client("numa-align/numa-0").admit(1) == {"NUMA_NODE": "0"}


def test_preferred_allocation_keeps_must_include_and_size(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES), capacity=5):
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-0")
        available = ["numa-0-4", "numa-0-3", "numa-0-1", "numa-0-0"]
        assert client.preferred(available, ["numa-0-3"], 3) == ["numa-0-3", "numa-0-0", "numa-0-1"]
        assert client.preferred(available, [], 0) == []
        assert sorted(client.preferred(available, ["numa-0-4", "numa-0-1"], 2)) == ["numa-0-1", "numa-0-4"]
        with pytest.raises(grpc.RpcError) as info:
            client.preferred(available, [], 5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "allocation_size 5" in info.value.details()


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["gpu-0"], "'gpu-0' is not a device of numa-align/numa-2"),
        (["numa-0-1"], "'numa-0-1' belongs to NUMA node 0"),
        (["numa-2-3"], "'numa-2-3' is not a device of numa-align/numa-2"),
        ([], "lists no device ids"),
    ],
    ids=["unknown", "other-node", "beyond-capacity", "empty"],
)
def test_bad_device_ids_are_invalid_argument_and_the_plugin_keeps_serving(
    ids, message, make_sysfs, kubelet, base_settings
):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)) as plugin:
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-2")
        with pytest.raises(grpc.RpcError) as info:
            client.allocate(["numa-2-0"], ids)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in info.value.details()
        assert client.admit(1) == {"NUMA_NODE": "2"}
        assert plugin.metrics.registry.get_sample_value("numa_align_allocate_errors_total") == 1


def test_capacity_cpus_advertises_unreserved_cpus_per_node(make_sysfs, kubelet, base_settings):
    cells = {0: "0-3", 1: "4-5", 3: "6-11"}
    with running_plugin(
        base_settings, sysfs_root=make_sysfs(cells), capacity="cpus", reserved_cpus=frozenset({0, 4, 5})
    ):
        assert kubelet.wait_connected(resources(cells))
        counts = {node: len(kubelet.client(resource_name(node)).devices) for node in cells}
        assert counts == {0: 3, 1: 0, 3: 6}
        assert kubelet.client("numa-align/numa-3").admit(6) == {"NUMA_NODE": "3"}


def test_plugin_waits_for_an_absent_kubelet(make_sysfs, socket_dir, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)) as plugin:
        assert all(endpoint.path.exists() for endpoint in plugin.endpoints.values())
        assert not (socket_dir / "kubelet.sock").exists()
        kubelet = KubeletDouble(socket_dir)
        kubelet.start()  # deletes the plugin's sockets, as a starting kubelet does
        try:
            assert kubelet.wait_connected(resources(TWO_NODES))
            assert kubelet.client("numa-align/numa-0").admit(1) == {"NUMA_NODE": "0"}
        finally:
            kubelet.stop()


def test_fifty_kubelet_restarts_are_all_followed_by_registration(make_sysfs, kubelet, base_settings):
    names = resources(FOUR_NODES)
    with running_plugin(base_settings, sysfs_root=make_sysfs(FOUR_NODES)) as plugin:
        assert kubelet.wait_connected(names)
        for run in range(1, 51):
            kubelet.restart()
            assert kubelet.wait_connected(names, generation=run), f"restart {run}: {kubelet.errors}"
        per_run = {}
        for generation, request in kubelet.registrations:
            per_run.setdefault(generation, set()).add(request.resource_name)
        assert all(per_run[run] == set(names) for run in range(51))
        assert kubelet.client("numa-align/numa-6").admit(3) == {"NUMA_NODE": "6"}
        # counted once register() returned, which can be after the kubelet double saw the last Register
        deadline = time.monotonic() + 10
        while (plugin.metrics.registry.get_sample_value("numa_align_registrations_total") < 51 * len(names)
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert plugin.metrics.registry.get_sample_value("numa_align_registrations_total") >= 51 * len(names)
        assert (kubelet.socket_dir / "kubelet_internal_checkpoint").exists()


def test_a_lost_socket_is_rebuilt_and_registered_again(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
        assert kubelet.wait_connected(resources(TWO_NODES))
        first = kubelet.client("numa-align/numa-2")
        (kubelet.socket_dir / "numa-2.sock").unlink()
        assert first.stream_ended() == grpc.StatusCode.OK  # the old server ended its stream cleanly
        second = kubelet.wait_new_client("numa-align/numa-2", first)
        assert second is not None, kubelet.errors
        _, again = kubelet.registrations[-1]
        assert again.resource_name == "numa-align/numa-2" and len(kubelet.registrations) == 3
        assert second.admit(1) == {"NUMA_NODE": "2"}


def test_a_socket_removed_between_its_bind_and_the_plugins_look_is_rebuilt(
    make_sysfs, kubelet, base_settings, monkeypatch
):
    """A starting kubelet cleans its directory: it may remove a socket the plugin bound a moment ago,
    before the plugin took note of the file it made. The plugin must still see the socket as lost."""
    real_listen = Endpoint._listen
    armed = threading.Event()

    def listen_then_lose(endpoint: Endpoint, server: grpc.Server) -> None:
        real_listen(endpoint, server)
        if endpoint.servicer.node == 2 and armed.is_set():
            armed.clear()
            endpoint.path.unlink()

    monkeypatch.setattr(Endpoint, "_listen", listen_then_lose)
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)) as plugin:
        assert kubelet.wait_connected(resources(TWO_NODES))
        first = kubelet.client("numa-align/numa-2")
        armed.set()
        (kubelet.socket_dir / "numa-2.sock").unlink()
        second = kubelet.wait_new_client("numa-align/numa-2", first)
        assert second is not None, kubelet.errors
        assert not armed.is_set() and (kubelet.socket_dir / "numa-2.sock").exists()
        assert not plugin.endpoints[2].socket_lost()
        assert second.admit(1) == {"NUMA_NODE": "2"}
        # the socket removed at once was never registered: once at start, once for the rebuilt one
        assert [r.resource_name for _, r in kubelet.registrations].count("numa-align/numa-2") == 2


def test_an_offline_node_is_resent_unhealthy_and_recovers(make_sysfs, kubelet, base_settings):
    sysfs = make_sysfs(TWO_NODES)
    with running_plugin(base_settings, sysfs_root=sysfs, rescan_interval=0.05):
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-2")
        make_sysfs({0: "0-1"})  # node 2 offline: node/online, cpu/online and the distance rows change
        assert client.wait_for(lambda c: all(d.health == "Unhealthy" for d in c.devices))
        assert [d.ID for d in client.devices] == ["numa-2-0", "numa-2-1", "numa-2-2"]
        assert all(d.health == "Healthy" for d in kubelet.client("numa-align/numa-0").devices)
        make_sysfs(TWO_NODES)
        assert client.wait_for(lambda c: all(d.health == "Healthy" for d in c.devices))
        # one list at start, one when offline, one when back: nothing is resent without a change
        assert len(client.updates) == 3


def test_cpu_count_change_is_resent_with_capacity_cpus(make_sysfs, kubelet, base_settings):
    sysfs = make_sysfs(TWO_NODES)
    with running_plugin(base_settings, sysfs_root=sysfs, capacity="cpus", rescan_interval=0.05):
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-0")
        assert len(client.devices) == 2
        make_sysfs({0: "0-1,8-9", 2: "2-3"})  # CPUs 8-9 hot-added to node 0 and online
        assert client.wait_for(lambda c: len(c.devices) == 4)


def test_memory_only_nodes_are_never_advertised(make_sysfs, kubelet, base_settings):
    cells = {0: "0-1", 1: "2-3", 250: "", 251: ""}
    with running_plugin(base_settings, sysfs_root=make_sysfs(cells), capacity="cpus") as plugin:
        assert kubelet.wait_connected(resources({0: "", 1: ""}))
        assert sorted(plugin.endpoints) == [0, 1]
        assert not (base_settings.socket_dir / "numa-250.sock").exists()
        assert plugin.metrics.node_memory_only.labels(node="250")._value.get() == 1
        assert plugin.metrics.node_memory_only.labels(node="0")._value.get() == 0


def test_a_node_whose_cpus_all_go_offline_turns_unhealthy(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES), rescan_interval=0.05):
        assert kubelet.wait_connected(resources(TWO_NODES))
        client = kubelet.client("numa-align/numa-2")
        make_sysfs(TWO_NODES, offline_cpus="2-3")
        assert client.wait_for(lambda c: c.devices and all(d.health == "Unhealthy" for d in c.devices))
        make_sysfs(TWO_NODES)
        assert client.wait_for(lambda c: all(d.health == "Healthy" for d in c.devices))


def test_stop_ends_streams_cleanly_and_removes_only_own_sockets(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
        assert kubelet.wait_connected(resources(TWO_NODES))
        clients = [kubelet.client(name) for name in resources(TWO_NODES)]
    assert [client.stream_ended() for client in clients] == [grpc.StatusCode.OK] * 2
    left = sorted(p.name for p in kubelet.socket_dir.iterdir())
    assert left == ["kubelet.sock", "kubelet_internal_checkpoint"]


def test_a_removed_and_recreated_socket_dir_is_served_again(make_sysfs, kubelet, base_settings):
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
        assert kubelet.wait_connected(resources(TWO_NODES))
        kubelet.stop()
        shutil.rmtree(kubelet.socket_dir)
        kubelet.socket_dir.mkdir()
        kubelet.start()
        assert kubelet.wait_connected(resources(TWO_NODES), generation=1), kubelet.errors
        assert kubelet.client("numa-align/numa-0").admit(1) == {"NUMA_NODE": "0"}


def test_a_bind_that_loses_the_socket_dir_is_retried_when_the_dir_is_back(
    make_sysfs, kubelet, base_settings, bind_spy, caplog
):
    """The race of a kubelet reinstall: the plugin goes to bind a new socket, the directory is removed
    before the bind. The directory is held absent across that attempt, then brought back."""
    caplog.set_level(logging.INFO, logger="numa_align")
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)) as plugin:
        assert kubelet.wait_connected(resources(TWO_NODES))
        kubelet.stop()
        bind_spy.arm(lambda: shutil.rmtree(kubelet.socket_dir))
        (kubelet.socket_dir / "numa-0.sock").unlink()  # the plugin rebinds it: the directory goes first
        assert bind_spy.wait_for(lambda attempts: {node for node, bound, _ in attempts if not bound} == {0, 2})
        time.sleep(3 * BIND_RETRY_FIRST)  # past the first retry: still nothing to bind in
        assert not kubelet.socket_dir.exists()
        assert [bound for _, bound, _ in bind_spy.attempts] == [False] * len(bind_spy.attempts)
        assert not any(endpoint.serving for endpoint in plugin.endpoints.values())
        assert f"cannot bind {kubelet.socket_dir}/numa-0.sock: {kubelet.socket_dir} does not exist" in caplog.text
        assert "bind attempt 1 failed, next in 0.1s" in caplog.text
        kubelet.socket_dir.mkdir()
        kubelet.start()
        assert kubelet.wait_connected(resources(TWO_NODES), generation=1), kubelet.errors
        assert all(endpoint.serving for endpoint in plugin.endpoints.values())
        assert kubelet.client("numa-align/numa-0").admit(1) == {"NUMA_NODE": "0"}
        assert "numa-align/numa-0: serving on" in caplog.text


def test_a_bind_that_keeps_failing_is_retried_with_growing_delays(make_sysfs, kubelet, base_settings, bind_spy, caplog):
    caplog.set_level(logging.INFO, logger="numa_align")
    blocker = kubelet.socket_dir / "numa-0.sock"
    with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
        assert kubelet.wait_connected(resources(TWO_NODES))
        first = kubelet.client("numa-align/numa-0")
        bind_spy.arm(blocker.mkdir)  # a directory where the socket goes: it cannot be removed
        blocker.unlink()
        assert bind_spy.wait_for(lambda attempts: len(attempts) >= 4)
        assert [bound for _, bound, _ in bind_spy.attempts[:4]] == [False] * 4
        for failures, delay in ((1, "0.1"), (2, "0.2"), (3, "0.4")):  # logged before the next attempt
            assert f"bind attempt {failures} failed, next in {delay}s" in caplog.text
        assert f"cannot remove stale {blocker}: Is a directory" in caplog.text
        blocker.rmdir()
        assert kubelet.wait_new_client("numa-align/numa-0", first) is not None, kubelet.errors
        assert bind_spy.attempts[-1][:2] == (0, True)
        recovered = re.search(r"numa-align/numa-0: serving on \S+ after (\d+) failed binds", caplog.text)
        assert recovered and int(recovered.group(1)) >= 4


def test_a_socket_that_cannot_be_bound_at_start_fails_the_start(make_sysfs, socket_dir, base_settings):
    (socket_dir / "numa-0.sock").mkdir()
    with pytest.raises(BindError, match="cannot remove stale"):
        with running_plugin(base_settings, sysfs_root=make_sysfs(TWO_NODES)):
            pass


def test_backoff_doubles_up_to_its_bound_and_resets():
    backoff = Backoff(BIND_RETRY_FIRST, BIND_RETRY_MAX)
    delays = [backoff.failed() for _ in range(10)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0]
    assert backoff.failures == 10 and not backoff.is_due()
    backoff.reset()
    assert backoff.is_due() and backoff.failed() == BIND_RETRY_FIRST


class _Stopping:
    """An endpoint's stop seam: records when its stop begins, finishes when `done` is set."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log, self.done = name, log, threading.Event()

    def begin_stop(self, grace: float) -> threading.Event:
        self.log.append(f"begin {self.name} {grace}")
        return self.done

    def finish_stop(self) -> None:
        self.log.append(f"finish {self.name}")


def test_servers_stop_within_one_grace_period_not_one_after_another():
    """A plugin with N servers must not need N grace periods to stop: systemd's TimeoutStopSec and the
    pod's termination grace are one deadline (an emulated worker with three nodes once overran it)."""
    log: list[str] = []
    endpoints = [_Stopping(name, log) for name in ("numa-0", "numa-1", "numa-3")]
    stopper = threading.Thread(target=stop_endpoints, args=(endpoints, 1.0))
    stopper.start()
    deadline = time.monotonic() + 10
    while len(log) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["begin numa-0 1.0", "begin numa-1 1.0", "begin numa-3 1.0"]  # none waited on yet
    for endpoint in endpoints:
        endpoint.done.set()
    stopper.join(10)
    assert log[3:] == ["finish numa-0", "finish numa-1", "finish numa-3"]
