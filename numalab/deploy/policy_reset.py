"""The policy-change reset: when a node's CPU or Memory Manager policy (or its reservations under the
static policies) changes, the kubelet refuses its old checkpoint files and does not start. So: drain
the node if the API answers, stop the kubelet (with RKE2: rke2-server or rke2-agent, which runs it),
remove the stale files, write the new config, start it, and uncordon once it is Ready. Never otherwise: a
run with the same policy plans nothing. Both config forms are compared: a KubeletConfiguration (upstream)
and RKE2's config.yaml.d drop-in with its `kubelet-arg` list."""

from __future__ import annotations

from pathlib import Path

import yaml
from pyinfra.operations import files, python, systemd

from numalab.deploy import api
from numalab.model.kubelet import state_files_to_remove

RKE2_KUBELET_ARGS = ("kubelet-arg", "kubelet-arg+")


def plan(previous_config: str, new_config: str) -> list[str]:
    """The state files to remove: none for a first install (no previous config) or an unchanged policy."""
    if not previous_config.strip():
        return []
    try:
        previous = yaml.safe_load(previous_config)
    except yaml.YAMLError:
        previous = None
    if not isinstance(previous, dict):
        return []  # not a config numa-lab wrote: nothing to compare, the kubelet's own checks decide
    return state_files_to_remove(_config_form(previous), _config_form(yaml.safe_load(new_config)))


def _config_form(document: dict) -> list[str] | dict:
    """An RKE2 drop-in's kubelet-arg list (`kubelet-arg+` appends, as numa-lab writes it), or the
    KubeletConfiguration itself."""
    keys = [key for key in RKE2_KUBELET_ARGS if key in document]
    return [arg for key in keys for arg in document.get(key) or []] if keys else document


def _drain_if_api(kubeconfig: Path, node: str) -> None:
    if api.read_node(kubeconfig, node) is not None:
        api.drain(kubeconfig, node)


def before_config(stale: list[str], kubeconfig: Path, name: str, service: str = "kubelet") -> None:
    """`service` is the unit that runs the kubelet; the stage starts it again after writing the config."""
    if not stale:
        return
    python.call(name=f"Drain {name}: its manager policy changed", function=_drain_if_api,
                kubeconfig=kubeconfig, node=name)
    systemd.service(name=f"Stop {service} (its kubelet) for the policy change", service=service, running=False)
    for path in stale:
        files.file(name=f"Remove {path} (written under the old policy)", path=path, present=False)


def after_ready(stale: list[str], kubeconfig: Path, name: str) -> None:
    if stale:
        python.call(name=f"Uncordon {name}", function=api.set_unschedulable,
                    kubeconfig=kubeconfig, node=name, unschedulable=False)
