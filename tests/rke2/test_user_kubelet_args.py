"""A user's RKE2 config files that set the kubelet flags numa-lab's drop-in sets: the fact's command run with sh
on a copy of /etc/rancher/rke2, and rke2_config refusing such a node before it plans any change."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyinfra.api.exceptions import DeployError

from numalab.deploy import controller
from numalab.deploy.rke2 import config
from numalab.deploy.rke2.facts import FILE_MARK, Rke2KubeletArgs
from tests.fakehost import fake_host

CONFIG_YAML = """\
token: K10secret::server:do-not-print
kubelet-arg:
  - max-pods=200
node-name: worker-1
"""
SITE = """\
# site settings
"kubelet-arg+":
- reserved-memory=0:memory=1Gi
-   "kube-reserved=cpu=1"
tls-san: [a]
"""
OURS = "kubelet-arg+:\n  - cpu-manager-policy=static\n"


def rke2_dir(root: Path) -> Path:
    (root / "config.yaml.d").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG_YAML)
    (root / "config.yaml.d" / "10-site.yaml").write_text(SITE)
    (root / "config.yaml.d" / "20-other.yml").write_text("kubelet-arg: v=2\n")
    (root / "config.yaml.d" / "30-nothing.yaml").write_text("node-label: [a=b]\n")
    (root / "config.yaml.d" / "50-numa-lab.yaml").write_text(OURS)
    (root / "config.yaml.d" / "95-LAST.YAML").write_text("kubelet-arg: []\n")  # empties the list: still listed
    (root / "config.yaml.d" / "README").write_text("kubelet-arg: [reserved-cpus=0]\n")  # not read by RKE2
    return root


def test_the_fact_lists_each_files_kubelet_args_and_never_prints_the_token(tmp_path: Path) -> None:
    fact = Rke2KubeletArgs()
    done = subprocess.run(["sh", "-c", fact.command(str(rke2_dir(tmp_path)))], capture_output=True, text=True,
                          check=True)
    assert "do-not-print" not in done.stdout
    assert fact.process(done.stdout.splitlines()) == {
        f"{tmp_path}/config.yaml": {"kubelet-arg": ["max-pods=200"]},
        f"{tmp_path}/config.yaml.d/10-site.yaml": {"kubelet-arg+": ["reserved-memory=0:memory=1Gi",
                                                                    "kube-reserved=cpu=1"]},
        f"{tmp_path}/config.yaml.d/50-numa-lab.yaml": {"kubelet-arg+": ["cpu-manager-policy=static"]},
        f"{tmp_path}/config.yaml.d/20-other.yml": {"kubelet-arg": ["v=2"]},
        f"{tmp_path}/config.yaml.d/95-LAST.YAML": {"kubelet-arg": []},
    }


def test_the_fact_reads_a_file_that_is_not_yaml_line_by_line() -> None:
    output = [f"{FILE_MARK}/x/10-bad.yaml", "kubelet-arg:", "  - reserved-cpus=0", " - [broken"]
    assert Rke2KubeletArgs().process(output) == {"/x/10-bad.yaml": {"kubelet-arg+": ["reserved-cpus=0", "[broken"]}}


def test_rke2_config_refuses_the_node_before_planning_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(config.context, "runs_pods", lambda host: True)
    monkeypatch.setattr(controller, "rke2_token", lambda host: "t")
    site = f"{config.CONFIG_DIR}/config.yaml.d/10-site.yaml"
    listing = [f"{FILE_MARK}{config.CONFIG}", "kubelet-arg: [max-pods=200]",
               f"{FILE_MARK}{site}", "kubelet-arg+:", "- reserved-memory=0:memory=1Gi",
               f"{FILE_MARK}{config.DROPIN}", *OURS.splitlines()]
    with fake_host(k8s_state_dir=str(tmp_path), fake_responses={FILE_MARK: listing}) as host:
        with pytest.raises(DeployError) as caught:
            config.rke2_config()
        assert not host.state.ops.get(host)  # no operation planned: nothing is written anywhere
    assert str(caught.value).startswith(f"@fake/node: {site}: kubelet-arg sets reserved-memory: ")


def test_a_node_that_runs_pods_gets_the_kubelet_boot_guard_before_its_service(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """RKE2 starts its kubelet itself, so the guard runs from a drop-in before rke2-agent (a double: RKE2
    cannot run here); the drop-in restarts nothing, it takes effect at the next start."""
    from numalab.model import components
    from numalab.model.kubelet import KubeletSettings, kubelet_policy
    from numalab.model.topology import Topology

    two = Topology.from_dict({"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"},
                                        {"id": 1, "cpus": "2-3", "memory": "2Gi"}]})
    policy = kubelet_policy(two, KubeletSettings.from_dict({"kubelet-version": "v1.31.4"}))
    monkeypatch.setattr(config.context, "runs_pods", lambda host: True)
    monkeypatch.setattr(config.context, "role_of", lambda host: {"rke2_agents"})
    monkeypatch.setattr(controller, "rke2_token", lambda host: "t")
    monkeypatch.setattr(config, "node_policy", lambda: policy)
    monkeypatch.setattr(config, "reset_files", lambda plan, policy: [])
    monkeypatch.setattr(config.policy_reset, "before_config", lambda *args, **kwargs: None)
    monkeypatch.setattr(config.context, "cluster_of", lambda host: type("C", (), {"registry_endpoint": ""})())
    monkeypatch.setattr(config, "config_text", lambda *args: "token: t\n")
    path, text = config.guard_dropin("rke2-agent", policy)
    assert path == "/etc/systemd/system/rke2-agent.service.d/10-numa-lab-kubelet-guard.conf"
    assert text == f"[Service]\nExecStartPre=-{components.GUARD_PYTHON} {components.KUBELET_GUARD}\n"
    with fake_host(k8s_state_dir=str(tmp_path), fake_responses={FILE_MARK: []}) as host:
        written = config.rke2_config()
        planned = " | ".join(" ".join(host.state.op_meta[op].names) for op in host.state.get_op_order())
    assert "runs the kubelet boot guard first" in planned and "Kubelet boot guard" in planned, planned
    assert len(written.changed) == 2  # config.yaml and the policy drop-in: the guard restarts nothing
