"""Which Kubernetes distribution a host gets: from NUMALAB_DISTRIBUTION through the lab's host data to the deploy."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api.exceptions import DeployError

from numalab.deploy.context import announce_distribution, chosen_distribution, node_address, node_name, state_dir
from numalab.lab.inventory import host_data
from numalab.lab.settings import settings_from_dict, settings_from_env
from numalab.lab.spec import lab_from_dict
from numalab.model.errors import ValidationError


@dataclass
class FakeHost:
    """What the context reads of a pyinfra Host: its name and `data.get(key)`."""

    data: dict[str, Any] = field(default_factory=dict)
    name: str = "@kvm/worker-a"


def test_auto_is_upstream_without_rke2_settings() -> None:
    assert chosen_distribution(FakeHost()) == ("upstream", "auto: no RKE2 artifacts or version configured")
    assert chosen_distribution(FakeHost({"k8s_distribution": "auto", "rke2_version": ""}))[0] == "upstream"


@pytest.mark.parametrize("key", ["rke2_version", "rke2_artifacts_dir", "rke2_install"])
def test_auto_is_rke2_when_rke2_is_configured(key: str) -> None:
    choice, why = chosen_distribution(FakeHost({key: "v1.33.1+rke2r1"}))
    assert choice == "rke2" and key in why


def test_auto_names_every_rke2_key_it_found() -> None:
    host = FakeHost({"rke2_version": "v1.33.1+rke2r1", "rke2_artifacts_dir": "/srv/rke2"})
    assert chosen_distribution(host) == ("rke2", "auto: RKE2 is configured (rke2_artifacts_dir, rke2_version)")


@pytest.mark.parametrize("asked", ["upstream", "rke2"])
def test_an_explicit_distribution_wins_over_the_rke2_keys(asked: str) -> None:
    host = FakeHost({"k8s_distribution": asked, "rke2_version": "v1.33.1+rke2r1"})
    choice, why = chosen_distribution(host)
    assert choice == asked and not why.startswith("auto")


def test_an_unknown_distribution_is_refused_naming_the_key_and_choices() -> None:
    with pytest.raises(DeployError) as caught:
        chosen_distribution(FakeHost({"k8s_distribution": "kubeadm"}))
    message = str(caught.value)
    assert message.startswith("@kvm/worker-a: k8s_distribution")
    assert "'kubeadm'" in message and "auto, rke2, upstream" in message


def test_the_announced_distribution_is_the_chosen_one() -> None:
    assert announce_distribution(FakeHost({"k8s_distribution": "upstream"})) == "upstream"
    assert announce_distribution(FakeHost({"rke2_version": "v1.33.1+rke2r1"})) == "rke2"


def test_names_and_addresses_prefer_explicit_keys_then_the_labs() -> None:
    lab_guest = FakeHost({"kvm_guest": "worker-a", "lab_address": "10.77.0.11", "ssh_hostname": "10.77.0.99"})
    assert (node_name(lab_guest), node_address(lab_guest)) == ("worker-a", "10.77.0.11")
    metal = FakeHost({"ssh_hostname": "192.168.1.20"}, name="metal-1")
    assert (node_name(metal), node_address(metal)) == ("metal-1", "192.168.1.20")
    pinned = FakeHost({"k8s_node_name": "n1", "k8s_address": "192.168.1.21", "kvm_guest": "x", "lab_address": "y"})
    assert (node_name(pinned), node_address(pinned)) == ("n1", "192.168.1.21")


def test_state_dir_is_explicit_or_the_labs_and_otherwise_asked_for(tmp_path: Path) -> None:
    assert state_dir(FakeHost({"k8s_state_dir": str(tmp_path)})) == tmp_path
    assert state_dir(FakeHost({"kvm_lab": {"settings": {"state_dir": str(tmp_path)}}})) == tmp_path
    with pytest.raises(DeployError, match="set k8s_state_dir"):
        state_dir(FakeHost())


# The lab side: NUMALAB_DISTRIBUTION -> Settings.distribution -> every guest's k8s_distribution.


def test_the_lab_setting_defaults_to_auto_and_reads_the_environment() -> None:
    assert settings_from_env({}, home=Path("/home/u")).distribution == "auto"
    assert settings_from_dict({}).distribution == "auto"
    for value in ("auto", "rke2", "upstream"):
        assert settings_from_env({"NUMALAB_DISTRIBUTION": value}, home=Path("/home/u")).distribution == value


@pytest.mark.parametrize("value", ["kubeadm", "Upstream", "k3s"])
def test_a_bad_lab_distribution_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        settings_from_env({"NUMALAB_DISTRIBUTION": value})
    assert caught.value.field == "NUMALAB.distribution"
    assert repr(value) in caught.value.message and "auto, rke2, upstream" in caught.value.message
    with pytest.raises(ValidationError) as caught:
        settings_from_dict({"distribution": value})
    assert caught.value.field == "settings.distribution"


def test_the_setting_survives_the_round_trip_through_host_data() -> None:
    lab = lab_from_dict(
        {
            "settings": {"name": "t", "distribution": "upstream"},
            "guests": [{"name": "worker-a", "vcpus": 2, "memory": "1Gi"}],
        }
    )
    assert lab.settings.to_dict()["distribution"] == "upstream"
    assert lab_from_dict(lab.to_dict()) == lab
    data = host_data(lab, lab.guests[0])
    assert data["k8s_distribution"] == "upstream"
    assert lab_from_dict(data["kvm_lab"]).settings.distribution == "upstream"
    assert chosen_distribution(FakeHost(data))[0] == "upstream"
    assert chosen_distribution(FakeHost({**data, "rke2_version": "v1.33.1+rke2r1"}))[0] == "upstream"


def test_a_lab_left_on_auto_deploys_upstream() -> None:
    lab = lab_from_dict({"settings": {"name": "t"}, "guests": [{"name": "worker-a", "vcpus": 2, "memory": "1Gi"}]})
    data = host_data(lab, lab.guests[0])
    assert data["k8s_distribution"] == "auto"
    assert chosen_distribution(FakeHost(data))[0] == "upstream"


def test_once_computes_once_per_host_through_pyinfras_host_proxy() -> None:
    """What several stages read while planned is read once per host (the sysfs dump: 6 reads per worker)."""
    from pyinfra import host as proxy
    from pyinfra.context import ctx_host

    from numalab.deploy.context import once

    first, second = FakeHost(name="@kvm/worker-1"), FakeHost(name="@kvm/worker-2")
    calls: list[str] = []

    def read(name: str) -> str:
        calls.append(name)
        return f"sysfs of {name}"

    for _ in range(3):
        for fake in (first, second):
            with ctx_host.use(fake):
                assert once(proxy, "sysfs", lambda: read(proxy.name)) == f"sysfs of {fake.name}"
    assert calls == ["@kvm/worker-1", "@kvm/worker-2"]
    assert once(first, "cgroup", lambda: "2") == "2"  # another key is computed on its own
