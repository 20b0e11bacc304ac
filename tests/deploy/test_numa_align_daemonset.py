"""The DaemonSet install's settings: one entry per node, each computed as that node's own stage would (under
pyinfra's host switched to it), so a mixed fleet's pods each publish their own kubelet's policy."""

from __future__ import annotations

import importlib

import pytest
from pyinfra import host
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.exceptions import DeployError
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state

from numalab.deploy import context

numa_align = importlib.import_module("numalab.deploy.numa_align")  # the module: the package exports the stage

NODES = {"worker-1": "0", "worker-3": "0-1"}


def inventory_state() -> State:
    """A server and two agents (@fake hosts), connected, planning."""
    server = ("@fake/server", {"k8s_node_name": "server", "k8s_address": "10.0.0.1"})
    agents = [(f"@fake/{name}", {"k8s_node_name": name, "k8s_address": f"10.0.0.{i + 2}"})
              for i, name in enumerate(NODES)]
    inventory = Inventory(([server, *agents], {"fake_delay": 0, "fake_delay_jitter": 0}),
                          rke2_servers=([server], {}), rke2_agents=(agents, {}))
    state = State(inventory, Config())
    state.set_stage(StateStage.Connect)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    return state


def test_every_node_gets_the_settings_its_own_host_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    def own_settings(kubeconfig: str | None = None) -> dict[str, str]:
        name = context.node_name(host)  # whichever host pyinfra has current
        return {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins", "NUMA_RESERVED_CPUS": NODES[name]}

    monkeypatch.setattr(numa_align, "plugin_settings", own_settings)
    state = inventory_state()
    first = state.inventory.get_host("@fake/worker-1")
    with ctx_state.use(state), ctx_host.use(first):
        every = numa_align._every_node_settings()
        assert context.node_name(host) == "worker-1"  # switched back afterwards
    assert every.nodes == {"worker-1": {"NUMA_RESERVED_CPUS": "0"}, "worker-3": {"NUMA_RESERVED_CPUS": "0-1"}}


def test_settings_the_one_template_cannot_hold_fail_the_run_naming_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    def own_settings(kubeconfig: str | None = None) -> dict[str, str]:
        name = context.node_name(host)
        return {"NUMA_SOCKET_DIR": f"/var/lib/{name}/device-plugins"}

    monkeypatch.setattr(numa_align, "plugin_settings", own_settings)
    state = inventory_state()
    with ctx_state.use(state), ctx_host.use(state.inventory.get_host("@fake/worker-1")):
        with pytest.raises(DeployError, match=r"inventory: numa_align_settings.NUMA_SOCKET_DIR: differs .*worker-1="):
            numa_align._every_node_settings()
