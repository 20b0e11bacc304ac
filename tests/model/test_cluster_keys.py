"""Keys with a cluster-wide effect must agree between hosts: refused naming each host and value."""

from __future__ import annotations

import pytest

from numalab.model.cluster import cluster_from_groups
from numalab.model.errors import ValidationError


def groups(server: dict | None = None, worker_1: dict | None = None, worker_2: dict | None = None,
           registry: dict | None = None) -> dict:
    return {"rke2_servers": [("server", "10.0.0.1", server or {})],
            "rke2_agents": [("worker-1", "10.0.0.2", worker_1 or {}), ("worker-2", "10.0.0.3", worker_2 or {})],
            "registry": [("registry", "10.0.0.4", registry or {})]}


def test_a_daemonset_on_one_node_and_a_unit_on_another_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError) as raised:
        cluster_from_groups("lab", groups(worker_1={"numa_align_install": "daemonset"}))
    assert str(raised.value) == ("numa_align_install: differs between hosts (worker-1='daemonset', "
                                 "worker-2='systemd'); it acts on the whole cluster, so set it the same on every "
                                 "host that runs pods (an unset key is its default, 'systemd')")


def test_node_keys_concern_only_hosts_that_run_pods() -> None:
    both = {"numa_align_install": "daemonset"}
    cluster = cluster_from_groups("lab", groups(worker_1=both, worker_2=both))  # the server runs no pods
    assert cluster.node_names == ("worker-1", "worker-2")
    with pytest.raises(ValidationError, match=r"server='systemd', worker-1='daemonset'"):
        cluster_from_groups("lab", groups(server={"k8s_server_runs_pods": True}, worker_1=both, worker_2=both))


def test_an_unset_key_agrees_with_its_default_spelled_out() -> None:
    cluster_from_groups("lab", groups(worker_1={"numa_align_install": "systemd"}))
    cluster_from_groups("lab", groups(registry={"k8s_distribution": "auto"}))


@pytest.mark.parametrize(("key", "value"), [("k8s_distribution", "rke2"), ("k8s_binaries", "/srv/k8s"),
                                            ("k8s_state_dir", "/srv/state"), ("rke2_registry_airgap", True)])
def test_cluster_keys_must_agree_on_every_host_the_registry_included(key: str, value: object) -> None:
    every = {key: value}
    cluster_from_groups("lab", groups(every, every, every, every))
    with pytest.raises(ValidationError, match=rf"^{key}: differs between hosts \(registry=.*server={value!r}"):
        cluster_from_groups("lab", groups(every, every, every))
