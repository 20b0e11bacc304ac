"""The policy-change reset: when a node's CPU or Memory Manager policy (or its reservations under the
static policies) changes, the kubelet refuses its old checkpoint files and does not start. So: drain the
node (cordon and mark it, evict its pods through the Eviction API so PodDisruptionBudgets hold), stop the
kubelet (with RKE2: rke2-server or rke2-agent, which runs it), remove the stale files, write the new config,
start it, and uncordon once it is Ready. It fails closed: no kubelet is stopped on a node not drained. A node
the API cannot be asked about refuses the run while it is planned (before any stage changes anything), and
the drain refuses pods it would lose (numalab.model.node_reset). Never otherwise: a run with the same policy
plans nothing, except to finish a reset a failed run left (the node still marked: uncordoned once Ready).
Both config forms are compared: a KubeletConfiguration (upstream) and RKE2's config.yaml.d drop-in with its
`kubelet-arg` list.

One node at a time: `one_node_at_a_time` runs the node stage of the nodes the cluster already has that plan
a reset in turn, each after the one before it finished on its host (Ready, uncordoned); the mark keeps any
other run from starting a second reset meanwhile (numalab.deploy.draining). A node that plans none drains
nothing, and goes at once: a run that resets no node does not walk the nodes one by one. Nor does a node the
API answers it does not have (a first join: no pods to protect); one it cannot be asked about never goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from pyinfra import host
from pyinfra.api.exceptions import DeployError
from pyinfra.api.host import Host
from pyinfra.operations import files, python, systemd

from numalab.deploy import api, context, draining
from numalab.deploy.operations import stage_barrier
from numalab.model.kubelet import state_files_to_remove
from numalab.model.node_reset import release_planned, unreachable_message

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


def before_config(stale: list[str], kubeconfig: Path, name: str, service: str = "kubelet") -> None:
    """`service` is the unit that runs the kubelet; the stage starts it again after writing the config."""
    if not stale:
        return
    python.call(name=f"Drain {name}: its manager checkpoints go (a policy change or a changed machine)",
                function=draining.drain, kubeconfig=kubeconfig, node=name, options=context.drain_options(host))
    systemd.service(name=f"Stop {service} (its kubelet) for the reset", service=service, running=False)
    for path in stale:
        files.file(name=f"Remove {path} (written under another policy or machine)", path=path, present=False)


def after_ready(stale: list[str], kubeconfig: Path, name: str) -> None:
    """Call after the stage's wait for Ready: ends this run's reset, or one a failed run left marked."""
    if release_planned(stale, None if stale else api.read_node(kubeconfig, name)):
        python.call(name=f"Uncordon {name} (end of its reset)", function=draining.release,
                    kubeconfig=kubeconfig, node=name)


def one_node_at_a_time(stage: Callable[[], object], reset: Sequence[str]) -> None:
    """Run the node `stage` on this host in its turn when it plans a `reset` (the state files it will remove),
    at once otherwise; call it from the same line on every host that runs pods. A node the cluster does
    not have yet has no pods to protect and goes at once too."""
    context.drain_options(host)  # checked on every run, not only on the one that needs them
    name = context.node_name(host)
    in_turn = bool(reset) and joined(context.state_dir(host) / "kubeconfig", name)
    take_turns(host, context.cluster_of(host).node_names, name, in_turn, stage)


def joined(kubeconfig: Path, name: str) -> bool:
    """Has the cluster Node `name`? Asked while the run is planned: an API that does not answer (or answers
    with an error) refuses the run here, before any stage changes anything, never taken for "not joined"."""
    try:
        return api.read_node(kubeconfig, name, must_answer=True) is not None
    except api.Problem as exc:
        raise DeployError(unreachable_message(name, api.problem_text(exc), kubeconfig)) from None


def take_turns(on: Host, order: Sequence[str], name: str, in_turn: bool, stage: Callable[[], object]) -> None:
    """Every host walks `order`, passing a barrier per turn; a node `in_turn` runs `stage` in its own turn, so
    pyinfra (which runs each operation on all hosts before the next) finishes it before the next turn; the
    others run it before the first turn, all at once."""
    if not in_turn:
        stage()
    for turn in on.loop(order):
        if in_turn and turn == name:
            stage()
        stage_barrier(before=f"the node after {turn}")
