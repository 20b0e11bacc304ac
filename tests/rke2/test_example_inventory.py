"""inventories/baremetal.example.py as pyinfra loads it: its groups, and data every stage accepts."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from numalab.model.cluster import cluster_from_groups
from numalab.model.kubelet import KubeletSettings
from numalab.model.rke2_install import rke2_install_from_data

EXAMPLE = Path(__file__).resolve().parents[2] / "inventories" / "baremetal.example.py"


def load(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict:
    for key in ("RKE2_SERVERS", "RKE2_AGENTS", "RKE2_REGISTRY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(EXAMPLE))


def test_defaults_name_one_server_two_agents_and_no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = load(monkeypatch)
    assert [name for name, _ in inventory["rke2_servers"]] == ["rke2-server-1"]
    assert [name for name, _ in inventory["rke2_agents"]] == ["rke2-agent-1", "rke2-agent-2"]
    assert "registry" not in inventory


def test_every_hosts_data_passes_the_stages_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = load(monkeypatch, RKE2_SERVERS="s1=10.0.0.10", RKE2_AGENTS="a1=10.0.0.11, a2=10.0.0.12",
                     RKE2_REGISTRY="reg=10.0.0.9")
    groups = {group: [(name, data["k8s_address"], data) for name, data in inventory[group]]
              for group in ("registry", "rke2_servers", "rke2_agents")}
    cluster = cluster_from_groups("metal", groups)
    assert cluster.server.name == "s1" and cluster.node_names == ("a1", "a2")
    assert str(cluster.registry.address) == "10.0.0.9" and not cluster.server.runs_pods
    for _, _, data in groups["rke2_agents"]:
        install = rke2_install_from_data(data, where="a1")
        assert (install.method, install.kubelet_version) == ("airgap", "v1.31.4")
        settings = KubeletSettings.from_dict({**data["kubelet_settings"], "kubelet-version": install.kubelet_version})
        assert (settings.cpu_manager_policy, settings.memory_manager_policy) == ("static", "Static")
        assert data["k8s_distribution"] == "rke2"
