"""The cluster test's reboot faults, on one worker under a pinned pod: hard resets (the reset button, no clean
shutdown) and a power cycle with a cell's memory changed, where the kubelet's own refusal is shown first
without numa-lab's boot guard and the recovery with it. Rows go to faults.FAULTS."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from numa_align.cpulist import parse_cpulist

from tests.cluster.checks import configz
from tests.cluster.faults import LABEL, NAMESPACE, Fault, api, in_step, wait
from tests.cluster.guests import boot_id, ssh, wait_booted

POLICIES = ("cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerScope")
NO_GUARD = "/etc/systemd/system/kubelet.service.d/99-fault-case-no-guard.conf"
REFUSAL = "the expected machine state is different from the real one"


class PinnedPod:
    """One Guaranteed Deployment replica on `node` with a CPU and `cell`'s numa-align device, which prints where
    it may run at each start; the checks every reboot fault makes of it and of its node."""

    NAME = "fault-pinned"

    def __init__(self, state: Path, node: str, image: str, cell: int) -> None:
        self.state, self.node, self.cell = state, node, cell
        api_client = api(state)
        self.api_client = api_client
        self.core, self.apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        cpulist = ssh(state, node, f"cat /sys/devices/system/node/node{cell}/cpulist").stdout.strip()
        self.cell_cpus = parse_cpulist(cpulist)
        resources = {"cpu": "1", "memory": "64Mi", f"numa-align/numa-{cell}": "1"}
        labels = {LABEL: self.NAME}
        script = "grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; exec sleep 36000"
        self.apps.create_namespaced_deployment(NAMESPACE, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": self.NAME, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "app", "image": image, "command": ["sh", "-c", script],
                                         "resources": {"requests": resources, "limits": resources}}]}}}})
        wait(f"{self.NAME} Running", lambda: self.running_since(None), 240)
        self.first = self.pinned()
        self.policies = self.configz()

    def delete(self) -> None:
        """Delete the Deployment and wait until its pod is gone (its CPU and memory back in the checkpoints)."""
        self.apps.delete_namespaced_deployment(self.NAME, NAMESPACE, propagation_policy="Foreground")
        wait(f"{self.NAME}'s pod gone", lambda: not self.core.list_namespaced_pod(
            NAMESPACE, label_selector=f"{LABEL}={self.NAME}").items, 180, 2)

    def pod(self) -> Any | None:
        """The Deployment's live pod: not ended, not being deleted. A pod the kubelet refused at its
        re-admission after a boot stays Failed beside the Deployment's new one (rejected() names them)."""
        pods = [pod for pod in self._pods() if pod.status.phase not in ("Failed", "Succeeded")
                and pod.metadata.deletion_timestamp is None]
        return pods[0] if len(pods) == 1 else None

    def _pods(self) -> list[Any]:
        return self.core.list_namespaced_pod(NAMESPACE, label_selector=f"{LABEL}={self.NAME}").items

    def describe(self) -> str:
        """Every pod of the Deployment: phase, reason, container state (a wait's failure says it)."""
        out = []
        for pod in self._pods():
            states = [status.state for status in pod.status.container_statuses or []]
            waiting = [state.waiting.reason for state in states if state.waiting is not None]
            out.append(f"{pod.metadata.name} {pod.status.phase} {pod.status.reason or ''} on {pod.spec.node_name} "
                       f"{'waiting ' + ','.join(waiting) if waiting else ''} {(pod.status.message or '')[:160]}")
        return "; ".join(out) or "no pod"

    def rejected(self) -> list[str]:
        """The Deployment's pods that ended Failed, each with the kubelet's reason and message (after a boot:
        UnexpectedAdmissionError while numa-align had not registered its devices yet, upstream's behaviour)."""
        return [f"{pod.metadata.name}: {pod.status.reason} ({(pod.status.message or '')[:160]})"
                for pod in self._pods() if pod.status.phase == "Failed"]

    def mark(self) -> tuple[str, int]:
        """(uid, restarts) now: what `running_since` compares with."""
        found = self.pod()
        return found.metadata.uid, found.status.container_statuses[0].restart_count

    def running_since(self, before: tuple[str, int] | None) -> bool:
        """Ready, and restarted since `before`: the same pod restarted, or a new one in its place."""
        found = self.pod()
        statuses = (found.status.container_statuses or []) if found is not None else []
        if not statuses or not statuses[0].ready:
            return False
        return before is None or found.metadata.uid != before[0] or statuses[0].restart_count > before[1]

    def pinned(self) -> dict[str, str]:
        """What its container's latest start printed: its CPUs within the cell, its memory the cell's."""
        log = self.core.read_namespaced_pod_log(self.pod().metadata.name, NAMESPACE, container="app")
        seen = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in log.splitlines()
                if "_allowed_list:" in line}
        in_cell = parse_cpulist(seen["Cpus_allowed_list"]) <= self.cell_cpus
        assert in_cell and seen["Mems_allowed_list"] == str(self.cell), (seen, self.cell_cpus)
        return seen

    def configz(self) -> dict[str, Any]:
        kubelet = configz(self.state, self.node)
        return {key: kubelet.get(key) for key in POLICIES}

    def boot_id(self) -> str:
        return boot_id(self.state, self.node)

    def wait_booted(self, boot: str) -> None:
        wait_booted(self.state, self.node, boot)

    def recovered(self, before: tuple[str, int]) -> None:
        """Everything a reboot must give back: the pod running again pinned to its cell, every pod on the node
        Ready, swap off, the kubelet's policies as before, numa-align registered, the NRT object current."""
        wait(f"{self.NAME} running again on {self.node}", lambda: self.running_since(before), 420, 3,
             why=self.describe)
        wait(f"every pod on {self.node} Ready again (CoreDNS included)", lambda: all(
            any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            for p in self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.node}").items
            if p.status.phase not in ("Succeeded", "Failed")), 240, 3)
        assert ssh(self.state, self.node, "tail -n +2 /proc/swaps").stdout.strip() == "", "swap came back"
        assert self.configz() == self.policies
        allocatable = self.core.read_node(self.node).status.allocatable
        assert allocatable.get(f"numa-align/numa-{self.cell}") not in (None, "0"), allocatable
        self.pinned()

        wait(f"{self.node}'s NRT object current (fingerprint of its bound, unfinished pods)",
             lambda: in_step(self.core, self.custom, self.node), 120)


def hard_resets(pinned: PinnedPod, reset: Callable[[], None], times: int = 2) -> Fault:
    """`times` hard resets of the pinned pod's node in a row, each recovered before the next."""
    recoveries, same = [], []
    for _ in range(times):
        before, boot = pinned.mark(), pinned.boot_id()
        started = time.monotonic()
        reset()
        pinned.wait_booted(boot)  # the fault took effect: the guest booted again
        pinned.recovered(before)
        recoveries.append(time.monotonic() - started)
        same.append(pinned.pod().metadata.uid == before[0])
    rejected = pinned.rejected()
    return Fault(f"hard reset x{times}", f"libvirt reset of {pinned.node} (no shutdown), a pinned Deployment pod on it",
                 f"new boot id; pod running again in cell {pinned.cell} (CPUs {pinned.first['Cpus_allowed_list']} "
                 "at first); every pod Ready; swap off; kubelet policies as before; numa-align registered; NRT current",
                 ", ".join(f"{seconds:.0f} s" for seconds in recoveries) + " from each reset to all of that",
                 "nothing (" + ("the same pod restarted" if all(same) else "a new pod in its place") + ")"
                 + replaced(rejected))


def changed_memory_power_cycle(pinned: PinnedPod, power_cycle: Callable[[], str]) -> Fault:
    """A power cycle that changes a cell's memory (`power_cycle` says how): first without numa-lab's boot guard
    (a drop-in clears the kubelet's ExecStartPre), so the kubelet's own refusal shows; then with it: it moves
    the Memory Manager's checkpoint aside (no container alive after the power cycle) and the kubelet starts."""
    state, node = pinned.state, pinned.node
    no_guard = f"printf '[Service]\\nExecStartPre=\\n' > {NO_GUARD}"
    # sync: the power is pulled next, and a file not yet on the disk would be gone at the boot (the guard on)
    added = ssh(state, node, f"mkdir -p {NO_GUARD.rsplit('/', 1)[0]} && {no_guard} && sync && systemctl daemon-reload")
    assert added.returncode == 0, added.stderr
    before, boot = pinned.mark(), pinned.boot_id()
    started = time.monotonic()
    changed = power_cycle()
    pinned.wait_booted(boot)
    refused = wait("the kubelet's own refusal of its memory checkpoint (no guard)", lambda: ssh(
        state, node, f"journalctl -b -u kubelet --no-pager | grep -c '{REFUSAL}' || true").stdout.strip() not in (
        "", "0"), 300, 3, why=lambda: ssh(state, node, f"ls {NO_GUARD}; journalctl -b -u kubelet --no-pager | "
                                                        "grep -iE 'guard|memory|fail' | tail -8").stdout)
    guarded = time.monotonic()
    back = ssh(state, node, f"rm -f {NO_GUARD} && systemctl daemon-reload && systemctl reset-failed kubelet; "
                            "systemctl restart kubelet")
    assert back.returncode == 0, back.stderr
    pinned.recovered(before)
    recovery = time.monotonic() - guarded
    kept = ssh(state, node, "ls /var/lib/kubelet/ | grep -c '^memory_manager_state.mismatch-' || true").stdout.strip()
    said = ssh(state, node, "journalctl -b -u kubelet --no-pager | grep -c 'numa-lab kubelet guard: moved "
                            "/var/lib/kubelet/memory_manager_state' || true").stdout
    assert kept not in ("", "0"), "the guard kept no moved-aside checkpoint"
    assert said.strip() not in ("", "0"), "the guard said nothing in the kubelet's journal"
    told = wait("the guard's move as numa-align's gauge and an Event on the Node", lambda: told_elsewhere(pinned), 120)
    return Fault("cell memory changed + power cycle", f"{changed}; first with the boot guard off",
                 f"kubelet refused ('{REFUSAL}') {refused:.0f} s after boot without the guard; with it: checkpoint "
                 f"moved aside (kept, journal line, gauge and Event {told:.0f} s after), pod back pinned, every pod "
                 "Ready, NRT current",
                 f"{recovery:.0f} s from the guard's kubelet start ({time.monotonic() - started:.0f} s in all)",
                 "nothing (the old checkpoint kept beside the new one)" + replaced(pinned.rejected()))


SET_ASIDE = 'numa_align_kubelet_checkpoint_set_aside{file="/var/lib/kubelet/memory_manager_state"} 1.0'


def told_elsewhere(pinned: PinnedPod) -> bool:
    """numa-align read the guard's record: its gauge says the memory checkpoint was set aside at this boot, and
    its Event KubeletCheckpointSetAside is on the Node."""
    gauge = ssh(pinned.state, pinned.node, f"curl -sf http://127.0.0.1:9201/metrics | grep -cF '{SET_ASIDE}'")
    if gauge.stdout.strip() in ("", "0"):
        return False
    events = pinned.core.list_namespaced_event(
        "default", field_selector=f"reason=KubeletCheckpointSetAside,involvedObject.name={pinned.node}").items
    return any("memory_manager_state" in (event.message or "") for event in events)


def replaced(rejected: list[str]) -> str:
    """What the lost column adds when the kubelet refused the pod at its re-admission after the boot."""
    return f"; refused at re-admission, replaced by its Deployment: {'; '.join(rejected)}" if rejected else ""
