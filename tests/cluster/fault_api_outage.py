"""Fault case: the cluster's API unreachable from the controller while a deploy plans a policy-change reset.

What a reset would change (the kubelet's start, its two checkpoints, the node's cordon) is read before and after
the refused run and must be the same. The kubelet rewrites its CPU checkpoint on its own within one reconcile
period (10 s) of a pinned pod's going, so the "before" waits until that checkpoint names only pods still on the
node: a case that ran just before (a pinned pod deleted) must not pass for a change made by the refused run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from kubernetes import client

from numalab.model.kubelet_checkpoint_files import read_cpu_checkpoint
from numalab.model.kubelet_checkpoints import CPU_MANAGER_STATE, MEMORY_MANAGER_STATE
from tests.cluster.faults import Fault, api, cordon_state, wait
from tests.cluster.guests import ssh

SETTLE_TIMEOUT = 90.0  # several reconcile periods of the CPU Manager (10 s) on a busy emulated guest


def kubelet_and_checkpoints(state: Path, nodes: Iterable[str]) -> dict[str, str]:
    """Per node: the kubelet's start and both checkpoints' contents' sums: what a reset would change."""
    command = f"systemctl show kubelet -p ActiveEnterTimestampMonotonic --value; md5sum {CPU_MANAGER_STATE} " \
              f"{MEMORY_MANAGER_STATE}"
    return {name: ssh(state, name, command).stdout for name in nodes}


def stale_cpu_entries(checkpoint: str, live_uids: set[str]) -> set[str]:
    """Pod UIDs the CPU Manager's checkpoint (its text) still assigns CPUs to that are no longer live on its node:
    the entries its reconcile loop is about to remove (and the checkpoint with them)."""
    _, _, assignments = read_cpu_checkpoint(checkpoint)
    return {pod for pod, _ in assignments} - live_uids


def _live_uids(core: client.CoreV1Api, node: str) -> set[str]:
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    return {pod.metadata.uid for pod in pods
            if pod.metadata.deletion_timestamp is None and pod.status.phase not in ("Succeeded", "Failed")}


def _stale(state: Path, core: client.CoreV1Api, workers: Iterable[str]) -> dict[str, set[str]]:
    found = {}
    for name in workers:
        read = ssh(state, name, f"cat {CPU_MANAGER_STATE}")
        assert read.returncode == 0, read.stderr
        stale = stale_cpu_entries(read.stdout, _live_uids(core, name))
        if stale:
            found[name] = stale
    return found


def settled_snapshot(state: Path, core: client.CoreV1Api, workers: list[str]
                     ) -> tuple[float, tuple[dict[str, str], dict[str, tuple[bool, str | None]]]]:
    """Seconds waited for the CPU checkpoints to name only live pods, then what a reset would change."""
    settled = wait("the CPU Manager's checkpoints naming only live pods", lambda: not _stale(state, core, workers),
                   SETTLE_TIMEOUT, 2, why=lambda: f"stale entries: {_stale(state, core, workers)}")
    return settled, (kubelet_and_checkpoints(state, workers), cordon_state(core, workers))


def api_unreachable_during_a_planned_reset(state: Path, workers: list[str],
                                           run_deploy: Callable[[], subprocess.CompletedProcess[str]]) -> Fault:
    """The controller's packets to the API server rejected on the server (the nodes still reach it), then a
    deploy that plans a reset on every worker: refused before any stage, naming a node and the API error;
    no node cordoned, no kubelet restarted, no checkpoint touched."""
    core = client.CoreV1Api(api(state))
    settled, before = settled_snapshot(state, core, workers)
    controller = ssh(state, "server", "echo $SSH_CONNECTION").stdout.split()[0]
    rule = f"INPUT -p tcp --dport 6443 -s {controller} -j REJECT --reject-with tcp-reset"
    added = ssh(state, "server", f"iptables -I {rule}")
    assert added.returncode == 0, added.stderr
    try:  # the fault took effect: the controller no longer reaches the API server
        assert not _answers(core, workers[0]), "the API server still answered the controller with its port rejected"
        run = run_deploy()
    finally:
        removed = ssh(state, "server", f"iptables -D {rule}")
    assert removed.returncode == 0, removed.stderr
    recovery = wait("the API server answering the controller again", lambda: _answers(core, workers[0]), 60, 1)
    output = run.stdout + run.stderr
    assert run.returncode != 0, output[-3000:]
    refused = [line for line in output.splitlines() if "its policy-change reset needs the cluster's API" in line]
    assert refused and "nothing was changed on" in refused[0], output[-4000:]
    assert not any(f"Drain {name}" in output for name in workers), output[-4000:]
    after = kubelet_and_checkpoints(state, workers), cordon_state(core, workers)
    assert after == before, (before, after)  # not cordoned, kubelets not restarted, checkpoints as they were
    return Fault("API unreachable during a planned reset",
                 "iptables REJECT of the controller's packets to :6443 on the server, then the reset deploy",
                 "run refused at planning naming the node and error; no cordon, kubelet restart or checkpoint "
                 "change on " + ", ".join(workers) + f" (checkpoints settled {settled:.0f} s before)",
                 f"API back {recovery:.0f} s after the rule went; the reset then ran", "nothing")


def _answers(core: client.CoreV1Api, node: str) -> bool:
    try:
        core.read_node(node, _request_timeout=5)
        return True
    except Exception:  # noqa: BLE001 - any failure to connect is an API server not answering
        return False
