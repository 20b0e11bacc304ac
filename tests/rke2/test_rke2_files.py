"""The files the RKE2 stages write (config.yaml, registries.yaml, the kubelet-arg+ drop-in, the admin kubeconfig),
read back as YAML the way RKE2 reads them, and the reset plan and service wait built from them."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from numalab.deploy.policy_reset import plan
from numalab.deploy.rke2.config import kubelet_args_text, service_of
from numalab.deploy.rke2.service import install_kubeconfig, wait_for_file_command
from numalab.model.errors import ValidationError
from numalab.model.kubelet import MEMORY_MANAGER_STATE, KubeletPolicy, KubeletSettings, kubelet_policy
from numalab.model.rke2 import registries_config, rke2_config
from numalab.model.topology import Topology
from numalab.render import render

TWO_CELLS = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
)
CA = "/etc/numa-lab/pki/cluster-ca.crt"


def policy(**settings: str) -> KubeletPolicy:
    return kubelet_policy(TWO_CELLS, KubeletSettings.from_dict({"kubelet-version": "v1.31.4", **settings}))


def test_agent_config_yaml_round_trips_with_node_name_and_default_registry() -> None:
    config = rke2_config("agent", token="s3cret", server="10.77.0.10", node_ip="10.77.0.11", node_name="worker-a",
                         system_default_registry="10.77.0.5:5000")
    loaded = yaml.safe_load(render("rke2/config.yaml.j2", **config.template_values()))
    assert loaded == {
        "server": "https://10.77.0.10:9345",
        "token": "s3cret",
        "system-default-registry": "10.77.0.5:5000",
        "node-name": "worker-a",
        "node-ip": "10.77.0.11",
    }


def test_server_config_yaml_leaves_out_unset_keys() -> None:
    config = rke2_config("server", token="s3cret", tls_san=("10.77.0.10", "server"), node_name="server")
    loaded = yaml.safe_load(render("rke2/config.yaml.j2", **config.template_values()))
    assert loaded["node-name"] == "server" and loaded["tls-san"] == ["10.77.0.10", "server"]
    assert loaded["write-kubeconfig-mode"] == "0600"
    assert "system-default-registry" not in loaded and "server" not in loaded


@pytest.mark.parametrize("registry", ["http://x", "https://10.77.0.5:5000", "10.77.0.5:port", "bad host"])
def test_a_bad_system_default_registry_names_the_field(registry: str) -> None:
    with pytest.raises(ValidationError) as caught:
        rke2_config("server", token="t", system_default_registry=registry, where="server: rke2")
    assert caught.value.field == "server: rke2.system-default-registry"


def test_registries_yaml_trusts_the_ca_for_the_lab_registry() -> None:
    values = registries_config("10.77.0.5:5000", mirror_docker_io=False, scheme="https", ca_file=CA)
    assert values["configs"] == {"10.77.0.5:5000": {"ca_file": CA}}
    loaded = yaml.safe_load(render("rke2/registries.yaml.j2", **values))
    assert loaded == {
        "mirrors": {"10.77.0.5:5000": {"endpoint": ["https://10.77.0.5:5000"]}},
        "configs": {"10.77.0.5:5000": {"tls": {"ca_file": CA}}},
    }


def test_registries_yaml_without_a_ca_has_no_configs() -> None:
    loaded = yaml.safe_load(render("rke2/registries.yaml.j2", **registries_config("10.77.0.5:5000")))
    assert "configs" not in loaded
    assert loaded["mirrors"]["docker.io"] == {"endpoint": ["http://10.77.0.5:5000"]}


def test_a_relative_ca_file_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        registries_config("10.77.0.5:5000", ca_file="cluster-ca.crt")
    assert caught.value.field == "registry.ca_file"


def test_the_kubelet_drop_in_appends_the_policy_args() -> None:
    computed = policy()
    assert yaml.safe_load(kubelet_args_text(computed)) == {"kubelet-arg+": list(computed.args)}
    assert "memory-manager-policy=Static" in computed.args


def test_the_service_follows_the_host_role() -> None:
    assert service_of({"rke2_servers"}) == "rke2-server"
    assert service_of({"rke2_servers", "rke2_agents"}) == "rke2-server"
    assert service_of({"rke2_agents"}) == "rke2-agent"
    assert service_of(set()) == "rke2-agent"


def test_a_changed_memory_policy_between_drop_ins_plans_its_state_file() -> None:
    before, after = kubelet_args_text(policy()), kubelet_args_text(policy(**{"memory-manager-policy": "None"}))
    assert plan(before, after) == [MEMORY_MANAGER_STATE]


def test_the_same_drop_in_twice_plans_nothing() -> None:
    text = kubelet_args_text(policy())
    assert plan(text, text) == []
    assert plan("", text) == []  # first install: nothing to reset


def test_install_kubeconfig_rewrites_the_server_and_is_private(tmp_path: Path) -> None:
    fetched = tmp_path / "rke2.yaml"
    fetched.write_text(yaml.safe_dump({
        "apiVersion": "v1",
        "clusters": [{"name": "default", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "default", "user": {"token": "x"}}],
    }))
    fetched.chmod(0o644)
    dest = tmp_path / "kubeconfig"
    install_kubeconfig(fetched, dest, "10.77.0.10")
    loaded = yaml.safe_load(dest.read_text())
    assert loaded["clusters"][0]["cluster"]["server"] == "https://10.77.0.10:6443"
    assert loaded["users"] == [{"name": "default", "user": {"token": "x"}}]
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert stat.S_IMODE(fetched.stat().st_mode) == 0o600


def run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30, check=False)


def test_wait_for_file_names_the_unit_journal() -> None:
    assert "journalctl -u rke2-agent" in wait_for_file_command("/etc/rancher/rke2/rke2.yaml", 300, "rke2-agent")


def test_wait_for_file_returns_at_once_when_written(tmp_path: Path) -> None:
    written = tmp_path / "rke2.yaml"
    written.write_text("apiVersion: v1\n")
    result = run(wait_for_file_command(str(written), 30, "rke2-server"))
    assert result.returncode == 0, result.stderr


def test_wait_for_a_missing_file_fails_pointing_at_the_journal(tmp_path: Path) -> None:
    result = run(wait_for_file_command(str(tmp_path / "never.yaml"), 1, "rke2-server"))
    assert result.returncode != 0
    assert "journalctl -u rke2-server" in result.stderr and "never.yaml not written after 1 s" in result.stderr
