"""The node stage's reset plan: the state files a policy change makes stale and the checkpoints that no longer
match the machine, once each, with a line per mismatch saying why; the kubelet unit runs the boot guard
first, and the node stage puts the guard's archive where the unit runs it."""

from __future__ import annotations

import configparser
import importlib
from pathlib import Path

import pytest
from numa_align.sysfs import read_sysfs

from numalab.deploy import checkpoints
from numalab.deploy.facts import TextFile
from numalab.model import components
from numalab.model.cluster import cluster_from_groups
from numalab.model.kubelet import CPU_MANAGER_STATE, MEMORY_MANAGER_STATE, KubeletSettings, kubelet_policy
from numalab.render import render
from numalab.sysfs import topology_from_sysfs
from tests.fakehost import commands_of, fake_host
from tests.fakesysfs import GIB_KIB, write_node_tree
from tests.model.test_kubelet_checkpoints import FRESH, cpu_state

node = importlib.import_module("numalab.deploy.node")  # the package's `node` is the stage function
CLUSTER = cluster_from_groups("t", {"rke2_servers": [("server", "10.77.0.10", {})],
                                    "rke2_agents": [("worker-a", "10.77.0.11", {})]})


class Files:
    """The host as planned_reset reads it: TextFile facts by path ('' when absent, as the fact says)."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def get_fact(self, fact: type, path: str) -> str:
        assert fact is TextFile
        return self.texts.get(path, "")


def plan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, texts: dict[str, str], *, previous: dict | None = None,
         **shape) -> tuple[list[str], list[str]]:
    """planned_reset on a host whose /sys is the fake tree `shape` (two 2 GiB cells, CPUs 0-1 and 2-3 by default)
    and whose files are `texts`, with the kubelet config the previous run wrote for the same machine unless
    `previous` gives other kubelet_settings; returns the plan and the lines said."""
    sysfs = write_node_tree(tmp_path / "sys", {0: "0-1", 1: "2-3"}, **shape)
    policy = kubelet_policy(topology_from_sysfs(sysfs), KubeletSettings.from_dict({}))
    written = policy if previous is None else kubelet_policy(topology_from_sysfs(sysfs),
                                                             KubeletSettings.from_dict(previous))
    host = Files({components.KUBELET_CONFIG: node.kubelet_config_text(CLUSTER, written), **texts})
    said: list[str] = []
    monkeypatch.setattr(node, "host", host)
    monkeypatch.setattr(checkpoints, "host", host)
    monkeypatch.setattr(node, "node_policy", lambda: policy)
    monkeypatch.setattr(node.context, "cluster_of", lambda host: CLUSTER)
    monkeypatch.setattr(checkpoints.context, "node_name", lambda host: "worker-a")
    monkeypatch.setattr(checkpoints, "host_sysfs", lambda: read_sysfs(sysfs))
    monkeypatch.setattr(checkpoints, "say", said.append)
    return node.planned_reset(), said


BOTH = {CPU_MANAGER_STATE: cpu_state(), MEMORY_MANAGER_STATE: FRESH}


def test_checkpoints_of_this_machine_plan_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert plan(monkeypatch, tmp_path, BOTH) == ([], [])


def test_a_cpu_taken_offline_plans_the_reset_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The lab's case (a): the config the new policy writes is the same, so only the machine tells."""
    assert plan(monkeypatch, tmp_path, BOTH, offline_cpus="3") == ([CPU_MANAGER_STATE], [
        f"worker-a: reset planned: {CPU_MANAGER_STATE}: it holds CPUs 0-3 but the machine has 0-2 online "
        "(no longer there: 3) (the kubelet would refuse it)"])


def test_a_shrunk_cell_plans_the_memory_reset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files, said = plan(monkeypatch, tmp_path, BOTH, memory_kib={0: 2 * GIB_KIB, 1: 1792 * 1024})
    assert files == [MEMORY_MANAGER_STATE]
    assert said == [f"worker-a: reset planned: {MEMORY_MANAGER_STATE}: NUMA node 1 memory: total 2Gi in it, "
                    "1792Mi on the machine (the kubelet would refuse it)"]


def test_a_policy_change_and_a_mismatch_plan_each_file_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files, said = plan(monkeypatch, tmp_path, BOTH, previous={"memory-manager-policy": "None"}, offline_cpus="3",
                       memory_kib={0: 2 * GIB_KIB, 1: 1792 * 1024})
    assert files == [CPU_MANAGER_STATE, MEMORY_MANAGER_STATE]
    assert len(said) == 2
    files, _ = plan(monkeypatch, tmp_path / "again", BOTH, previous={"memory-manager-policy": "None"})
    assert files == [MEMORY_MANAGER_STATE]  # the policy change alone, as before


def test_no_checkpoints_plan_nothing_without_reading_the_machine(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(checkpoints, "host_sysfs", lambda: pytest.fail("read /sys for no checkpoint"))
    files = plan(monkeypatch, tmp_path, {}, offline_cpus="3")
    assert files == ([], [])


def unit(component: components.Component) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(render("k8s/component.service.j2", component=component, environment={}))
    return parser["Service"]


def test_the_kubelet_unit_runs_the_guard_first_and_ignores_its_failure() -> None:
    service = unit(components.kubelet(CLUSTER, "worker-a"))
    assert service["ExecStartPre"] == f"-/usr/bin/python3 -S -E {components.KUBELET_GUARD}"
    assert "ExecStartPre" not in unit(components.scheduler(CLUSTER))


def test_strict_cpu_reservation_gives_the_guard_the_reserved_cpus(tmp_path: Path) -> None:
    topology = topology_from_sysfs(write_node_tree(tmp_path, {0: "0-1", 1: "2-3"}))
    strict = kubelet_policy(topology, KubeletSettings.from_dict(
        {"cpu-manager-policy-options": {"strict-cpu-reservation": "true"}}))
    assert unit(components.kubelet(CLUSTER, "worker-a", strict))["ExecStartPre"].endswith(
        f"{components.KUBELET_GUARD} --strict-reserved-cpus=0")
    plain = kubelet_policy(topology, KubeletSettings.from_dict({}))
    assert unit(components.kubelet(CLUSTER, "worker-a", plain))["ExecStartPre"].endswith(components.KUBELET_GUARD)


def test_the_guard_archive_goes_where_the_unit_runs_it() -> None:
    with fake_host():
        commands = [str(c) for c in commands_of(checkpoints.put_guard())]
    assert any(components.KUBELET_GUARD in command for command in commands), commands
