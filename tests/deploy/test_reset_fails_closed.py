"""A reset that fails closed, as pyinfra plans and runs it on @fake hosts against the fake API server: an API that
does not answer stops the run while it is planned (before any node's stage), and one that stops answering
between planning and the drain fails that host's drain, so its kubelet is never stopped and no checkpoint
removed. "Not in the cluster" is only what the API answers (404): such a node goes at once, nothing to drain."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pyinfra
import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.exceptions import DeployError, PyinfraError
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state
from pyinfra.operations import python

from numalab.deploy import api, context, policy_reset
from numalab.model.kubelet import MEMORY_MANAGER_STATE
from numalab.model.node_reset import MARK, DrainOptions
from tests.deploy.fakeapi import FakeCluster, fake_api, node, pod

NODES = ("worker-1", "worker-2", "worker-3")
README = Path(__file__).resolve().parents[2] / "inventories" / "README.md"


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add(node("worker-1"), node("worker-3"), pod("apps", "web-1", "worker-1", owner="ReplicaSet"))
    return cluster


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> Iterator[Path]:
    with fake_api(cluster, tmp_path) as path:
        yield path


def record(events: list[str], what: str) -> None:
    events.append(what)


def plan_and_run(monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, plan: Callable[[str], None]) -> State:
    """Plan `plan(node name)` on a @fake host per node as the CLI would (a planning error propagates), run it."""
    monkeypatch.setattr(pyinfra, "is_cli", True)
    monkeypatch.setattr(policy_reset.context, "node_name", lambda host: host.name.removeprefix("@fake/"))
    monkeypatch.setattr(policy_reset.context, "state_dir", lambda host: kubeconfig.parent)
    monkeypatch.setattr(policy_reset.context, "cluster_of", lambda host: SimpleNamespace(node_names=NODES))
    state = State(Inventory(([f"@fake/{name}" for name in NODES], {"fake_delay": 0})), Config())
    state.current_deploy_filename = __file__
    state.set_stage(StateStage.Connect)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    with ctx_state.use(state):
        for host in state.inventory:
            with ctx_host.use(host):
                plan(host.name.removeprefix("@fake/"))
        state.set_stage(StateStage.Execute)
        try:
            run_ops(state)
        except PyinfraError:
            pass  # every host failed: pyinfra stops the run
    return state


def node_stage(events: list[str], stale: dict[str, list[str]]) -> Callable[[str], None]:
    """What deploys/cluster.py plans per host: the node stage, one node at a time; the stage records its
    stop and removals as operations, so a test sees whether they were planned and whether they ran."""
    def plan(name: str) -> None:
        def stage() -> None:
            events.append(f"planned {name}")
            for path in stale.get(name, []):
                python.call(name="stop and remove", function=record, events=events, what=f"removed {path} on {name}")
        policy_reset.one_node_at_a_time(stage, stale.get(name, []))
    return plan


def test_an_unanswered_api_refuses_the_run_before_any_stage_is_planned(monkeypatch, cluster, kubeconfig) -> None:
    """Before: the node was taken for "not joined", went at once and its kubelet was stopped under its pods."""
    cluster.failing = 503
    events: list[str] = []
    stale = {"worker-1": [MEMORY_MANAGER_STATE]}
    with pytest.raises(DeployError) as caught:
        plan_and_run(monkeypatch, kubeconfig, node_stage(events, stale))
    message = str(caught.value)
    assert re.match(r"worker-1: its policy-change reset needs the cluster's API .*\(HTTP 503 ", message), message
    assert "planned worker-1" not in events and not any(e.startswith("removed") for e in events)
    assert cluster.nodes["worker-1"]["spec"]["unschedulable"] is False


def test_no_api_at_all_refuses_the_run_too(monkeypatch, tmp_path) -> None:
    with fake_api(FakeCluster(), tmp_path) as gone:
        pass  # shut down: its port no longer answers
    events: list[str] = []
    with pytest.raises(DeployError, match="worker-2: .*did not answer .*Connection refused"):
        plan_and_run(monkeypatch, gone, node_stage(events, {"worker-2": [MEMORY_MANAGER_STATE]}))
    assert events == ["planned worker-1"]  # planning stopped at worker-2: nothing ran anywhere


def test_nodes_that_plan_no_reset_do_not_ask_the_api(monkeypatch, cluster, kubeconfig) -> None:
    cluster.failing = 503  # a run that resets nothing is not held up by the API
    events: list[str] = []
    state = plan_and_run(monkeypatch, kubeconfig, node_stage(events, {}))
    assert not state.failed_hosts and sorted(events) == [f"planned {name}" for name in NODES]


def test_a_node_the_api_answers_it_lacks_goes_at_once(monkeypatch, cluster, kubeconfig) -> None:
    """worker-2 has no Node (a first join): no pods to protect, so it does not wait for worker-1's turn."""
    events: list[str] = []
    stale = {"worker-1": [MEMORY_MANAGER_STATE], "worker-2": [MEMORY_MANAGER_STATE]}
    state = plan_and_run(monkeypatch, kubeconfig, node_stage(events, stale))
    assert not state.failed_hosts
    assert events.index(f"removed {MEMORY_MANAGER_STATE} on worker-2") < events.index(
        f"removed {MEMORY_MANAGER_STATE} on worker-1")


def test_an_api_gone_before_the_drain_fails_it_and_the_kubelet_is_never_stopped(monkeypatch, cluster,
                                                                              kubeconfig) -> None:
    """The drain is planned (the API answered then), the API stops answering: the host fails at its drain."""
    events: list[str] = []
    monkeypatch.setattr(policy_reset.systemd, "service", lambda **kwargs: python.call(
        name="stop", function=record, events=events, what=f"stopped {kwargs['service']}"))
    monkeypatch.setattr(policy_reset.files, "file", lambda **kwargs: python.call(
        name="remove", function=record, events=events, what=f"removed {kwargs['path']}"))

    def plan(name: str) -> None:
        if name == "worker-1":
            python.call(name="the API goes down", function=lambda: setattr(cluster, "failing", 503))
            policy_reset.before_config([MEMORY_MANAGER_STATE], kubeconfig, name)

    state = plan_and_run(monkeypatch, kubeconfig, plan)
    assert [host.name for host in state.failed_hosts] == ["@fake/worker-1"]
    assert events == []  # neither the stop nor the removal ran
    cluster.failing = None
    assert MARK not in cluster.nodes["worker-1"]["metadata"]["annotations"]
    assert ("apps", "web-1") in cluster.pods


def test_the_drain_keys_reach_the_drain_and_bad_values_are_refused() -> None:
    host = SimpleNamespace(name="@kvm/worker-1", data={})
    assert context.drain_options(host) == DrainOptions()
    host.data = {"drain_force": True, "drain_delete_emptydir_data": True}
    assert context.drain_options(host) == DrainOptions(force=True, delete_emptydir_data=True)
    host.data = {"drain_force": "yes"}
    with pytest.raises(DeployError, match="@kvm/worker-1: drain_force is 'yes'; expected true or false"):
        context.drain_options(host)


def test_the_drain_keys_are_documented() -> None:
    documented = README.read_text()
    for key in ("drain_force", "drain_delete_emptydir_data"):
        assert key in context.DEFAULTS and f"| `{key}` | `false` |" in documented


def test_read_node_tells_absent_from_unanswered(cluster, kubeconfig) -> None:
    assert api.read_node(kubeconfig, "worker-1", must_answer=True).metadata.name == "worker-1"
    assert api.read_node(kubeconfig, "worker-2", must_answer=True) is None  # the API answered: no such Node
    cluster.failing = 503
    assert api.read_node(kubeconfig, "worker-1") is None  # the default still reads "not there yet"
    with pytest.raises(api.Problem) as caught:
        api.read_node(kubeconfig, "worker-1", must_answer=True)
    assert api.problem_text(caught.value) == "HTTP 503 Service Unavailable"
