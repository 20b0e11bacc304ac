"""The policy-change reset: when a node's CPU or Memory Manager policy (or its reservations under the
static policies) changes, the kubelet refuses its old checkpoint files and does not start. So: drain
the node if the API answers, stop the kubelet, remove the stale files, write the new config, start it,
and uncordon once it is Ready. Never otherwise: a run with the same policy plans nothing."""

from __future__ import annotations

from pathlib import Path

import yaml
from pyinfra.operations import files, python, systemd

from numalab.deploy import api
from numalab.model.kubelet import state_files_to_remove


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
    return state_files_to_remove(previous, yaml.safe_load(new_config))


def _drain_if_api(kubeconfig: Path, node: str) -> None:
    if api.read_node(kubeconfig, node) is not None:
        api.drain(kubeconfig, node)


def before_config(stale: list[str], kubeconfig: Path, name: str) -> None:
    if not stale:
        return
    python.call(name=f"Drain {name}: its manager policy changed", function=_drain_if_api,
                kubeconfig=kubeconfig, node=name)
    systemd.service(name="Stop the kubelet for the policy change", service="kubelet", running=False)
    for path in stale:
        files.file(name=f"Remove {path} (written under the old policy)", path=path, present=False)


def after_ready(stale: list[str], kubeconfig: Path, name: str) -> None:
    if stale:
        python.call(name=f"Uncordon {name}", function=api.set_unschedulable,
                    kubeconfig=kubeconfig, node=name, unschedulable=False)
