from pathlib import Path

import pytest
import yaml

from numalab.model.errors import ValidationError
from numalab.model.kubelet import kubelet_policy
from numalab.model.rke2 import registries_config, rke2_config
from numalab.model.topology import Topology
from numalab.render import render

EXPECTED = Path(__file__).resolve().parent.parent / "expected"
TOPOLOGY = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-1", "memory": "2Gi"}, {"id": 1, "cpus": "2-3", "memory": "2Gi"}]}
)


def server():
    return rke2_config(
        "server",
        token="K10f00::server:s3cr#t",
        tls_san=["server.lab", "10.77.0.10"],
        node_taints=["CriticalAddonsOnly=true:NoExecute"],
    )


def agent():
    return rke2_config(
        "agent",
        token_file="/etc/rancher/rke2/token",
        server="server.lab",
        node_labels={"numa-lab.io/worker": "true", "topology.numa-lab.io/cells": "2"},
        kubelet_args=kubelet_policy(TOPOLOGY).args,
        node_ip="10.77.0.21",
    )


@pytest.mark.parametrize(("name", "config"), [("rke2-server.yaml", server), ("rke2-agent.yaml", agent)])
def test_config_matches_expected_file(name, config):
    assert render("rke2/config.yaml.j2", **config().template_values()) == (EXPECTED / name).read_text()


def test_config_round_trips_values_through_yaml():
    parsed = yaml.safe_load(render("rke2/config.yaml.j2", **server().template_values()))
    assert parsed == {
        "token": "K10f00::server:s3cr#t",
        "write-kubeconfig-mode": "0600",
        "tls-san": ["server.lab", "10.77.0.10"],
        "node-taint": ["CriticalAddonsOnly=true:NoExecute"],
    }
    parsed = yaml.safe_load(render("rke2/config.yaml.j2", **agent().template_values()))
    assert parsed["server"] == "https://server.lab:9345"
    assert parsed["token-file"] == "/etc/rancher/rke2/token"
    assert "write-kubeconfig-mode" not in parsed
    assert parsed["kubelet-arg"] == list(kubelet_policy(TOPOLOGY).args)
    assert (
        "eviction-hard=imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"
        in (parsed["kubelet-arg"])
    )
    assert parsed["node-label"] == ["numa-lab.io/worker=true", "topology.numa-lab.io/cells=2"]


def test_hostile_strings_survive_quoting():
    nasty = 'a: b # c "d" \\e'
    parsed = yaml.safe_load(render("rke2/config.yaml.j2", **rke2_config("server", token=nasty).template_values()))
    assert parsed["token"] == nasty


def test_registries_matches_expected_file_and_round_trips():
    text = render("rke2/registries.yaml.j2", **registries_config("registry.lab:5000"))
    assert text == (EXPECTED / "registries.yaml").read_text()
    assert yaml.safe_load(text) == {
        "mirrors": {
            "docker.io": {"endpoint": ["http://registry.lab:5000"]},
            "registry.lab:5000": {"endpoint": ["http://registry.lab:5000"]},
        }
    }


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"role": "worker"}, "rke2.role"),
        ({"role": "agent", "token": "t"}, "rke2.server"),
        ({"role": "agent", "server": "s"}, "rke2.token"),
        ({"role": "server", "token": "t", "token_file": "/f"}, "rke2.token"),
        ({"role": "agent", "token": "t", "server": "https://s:9345"}, "rke2.server"),
        ({"role": "server", "tls_san": ["bad host"]}, "rke2.tls-san[0]"),
        ({"role": "server", "node_labels": {"-bad": "x"}}, "rke2.node-label.-bad"),
        ({"role": "server", "node_labels": {"ok": "bad value"}}, "rke2.node-label.ok"),
        ({"role": "server", "node_taints": ["key=value:Sometimes"]}, "rke2.node-taint[0]"),
        ({"role": "server", "write_kubeconfig_mode": "0999"}, "rke2.write-kubeconfig-mode"),
    ],
)
def test_bad_rke2_settings_name_the_field(kwargs, field):
    role = kwargs.pop("role")
    with pytest.raises(ValidationError) as err:
        rke2_config(role, **kwargs)
    assert err.value.field == field


def test_bad_registry_is_refused():
    with pytest.raises(ValidationError, match="bad port"):
        registries_config("registry.lab:99999")
