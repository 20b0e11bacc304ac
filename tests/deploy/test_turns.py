"""One node at a time, as pyinfra really runs it: @fake hosts, operations ordered by their call lines as the
CLI orders them, run in pyinfra's default mode (each operation on every host at once, then the next)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import gevent
import pyinfra
import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state
from pyinfra.operations import python

from numalab.deploy import policy_reset
from numalab.deploy.policy_reset import take_turns

NODES = ("worker-1", "worker-2", "worker-3")


def reset(events: list[tuple[str, str]], node: str) -> None:
    """A stand-in for a node's reset (drain ... uncordon): it takes a while, and lets other greenlets run."""
    events.append(("start", node))
    gevent.sleep(0.02)
    events.append(("end", node))


def run(monkeypatch: pytest.MonkeyPatch, plan: Callable) -> list[tuple[str, str]]:
    """Plan `plan(host, name, stage)` on every fake host as the CLI would, run it, and return the events."""
    monkeypatch.setattr(pyinfra, "is_cli", True)
    state = State(Inventory(([f"@fake/{name}" for name in NODES], {"fake_delay": 0})), Config())
    state.current_deploy_filename = __file__
    state.set_stage(StateStage.Connect)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    events: list[tuple[str, str]] = []
    with ctx_state.use(state):
        for host in state.inventory:
            name = host.name.removeprefix("@fake/")
            with ctx_host.use(host):
                plan(host, name, lambda name=name: python.call(name="reset", function=reset, events=events, node=name))
        state.set_stage(StateStage.Execute)
        run_ops(state)
    assert not state.failed_hosts
    return events


def overlapping(events: list[tuple[str, str]]) -> bool:
    running = 0
    for kind, _ in events:
        running += 1 if kind == "start" else -1
        if running > 1:
            return True
    return False


def test_without_turns_pyinfra_resets_every_node_at_once(monkeypatch) -> None:
    """What the node stage did before: the same operation on every host runs in parallel."""
    events = run(monkeypatch, lambda host, name, stage: stage())
    assert overlapping(events)


def test_nodes_in_the_cluster_take_turns(monkeypatch) -> None:
    events = run(monkeypatch, lambda host, name, stage: take_turns(host, NODES, name, True, stage))
    assert not overlapping(events)
    assert events == [(kind, node) for node in NODES for kind in ("start", "end")]


def test_nodes_new_to_the_cluster_go_at_once_and_before_the_turns(monkeypatch) -> None:
    joined = {"worker-2"}
    events = run(monkeypatch, lambda host, name, stage: take_turns(host, NODES, name, name in joined, stage))
    assert sorted(events[:4]) == [("end", "worker-1"), ("end", "worker-3"), ("start", "worker-1"),
                                  ("start", "worker-3")]
    assert events[4:] == [("start", "worker-2"), ("end", "worker-2")]


def test_joined_nodes_that_plan_no_reset_go_at_once_and_the_resetting_one_in_its_turn(monkeypatch) -> None:
    """A run that changes worker-2's manager policy: worker-1 and worker-3 (same policy: no drain) do not wait
    for its turn, so a run without a reset anywhere does not walk the nodes one by one."""
    monkeypatch.setattr(policy_reset.context, "node_name", lambda host: host.name.removeprefix("@fake/"))
    monkeypatch.setattr(policy_reset.context, "state_dir", lambda host: Path("/nonexistent"))
    monkeypatch.setattr(policy_reset.context, "cluster_of", lambda host: SimpleNamespace(node_names=NODES))
    monkeypatch.setattr(policy_reset.api, "read_node", lambda kubeconfig, name, **_: object())  # every node joined
    stale = {"worker-2": ["/var/lib/kubelet/memory_manager_state"]}
    events = run(monkeypatch, lambda host, name, stage: policy_reset.one_node_at_a_time(stage, stale.get(name, [])))
    assert sorted(events[:4]) == [("end", "worker-1"), ("end", "worker-3"), ("start", "worker-1"),
                                  ("start", "worker-3")]
    assert events[4:] == [("start", "worker-2"), ("end", "worker-2")]
