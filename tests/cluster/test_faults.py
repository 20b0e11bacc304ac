"""The fault table the cluster test prints: one line per case, in the order run, the columns the issue asks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.cluster import fault_api_outage as outage
from tests.cluster import fault_scheduler_cache as scheduler_cache
from tests.cluster import faults


def test_the_fault_table_lists_every_case_with_its_recovery_and_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faults, "FAULTS", [])
    assert faults.fault_table() == []
    faults.FAULTS.append(faults.Fault("hard reset x1", "libvirt reset", "pod back pinned", "93 s", "nothing"))
    faults.FAULTS.append(faults.Fault("stuck Pending pod", "no such image", "in step", "4 s", "nothing"))
    assert faults.fault_table() == [
        "fault table:",
        "fault | injected | checked | recovery | lost",
        "hard reset x1 | libvirt reset | pod back pinned | 93 s | nothing",
        "stuck Pending pod | no such image | in step | 4 s | nothing",
    ]


def test_the_cache_took_the_new_object_only_by_a_line_after_it_was_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """numa-scheduler's journal (short-unix): the adopter naming the object's uid, or a flush of the node after
    the object's creation; a flush before it, of another node, or an adoption of another uid does not count."""
    made = {"uid": "uid-new", "creationTimestamp": "2026-11-26T18:00:10Z"}
    at = 1795716010.0  # 2026-11-26T18:00:10Z
    journal: list[str] = []
    asked: list[str] = []

    def ssh(state, guest, command):
        asked.append(command)
        return type("Done", (), {"stdout": "\n".join(journal)})()

    monkeypatch.setattr(scheduler_cache, "ssh", ssh)
    journal[:] = [f"{at - 3:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-1\"",
                  f"{at + 1:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-3\"",
                  f"{at + 2:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                  "node=\"worker-1\" uid=\"uid-old\""]
    assert scheduler_cache.cache_took(None, "worker-1", made) == ""
    assert "--since @1795716009" in asked[0]
    journal.append(f"{at + 4:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-1\"")
    assert scheduler_cache.cache_took(None, "worker-1", made) == "upstream's resync: the node was marked for it"
    journal.insert(0, f"{at + 3:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                      "node=\"worker-1\" reason=\"made again\" uid-new")
    assert scheduler_cache.cache_took(None, "worker-1", made) == "numa-lab's adopter"
    journal.insert(0, f"{at + 2:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                      "node=\"worker-1\" reason=\"marked for resync with no pod bound (upstream skips it), its "
                      "object's fingerprint the empty set's\" uid=\"uid-new\"")
    assert scheduler_cache.cache_took(None, "worker-1", made) == "numa-lab's adopter, the node idle"


def test_a_flush_counts_only_after_the_mark() -> None:
    """The stuck-pod case reads the lines from the first mark on: which flush took the node back."""
    said = ['"flushing" node="worker-1"', '"marked with foreign pods" node="worker-1"',
            '"adopting NodeResourceTopology" node="worker-1" reason="marked for resync with no pod bound (upstream '
            "skips it), its object's fingerprint the empty set's\""]
    assert scheduler_cache.took(said) == "upstream's resync: the node was marked for it"
    assert scheduler_cache.took(said[1:]) == "numa-lab's adopter, the node idle"
    assert scheduler_cache.took(said[1:2]) == ""


def test_the_outage_case_reads_its_before_only_once_the_cpu_checkpoint_names_live_pods_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CI failed at 99cd371: a pinned pod deleted just before, the kubelet's reconcile loop dropped its entry from
    cpu_manager_state during the refused run, and the case read that as the run touching the checkpoint."""
    checkpoint = {"policyName": "static", "defaultCpuSet": "0,2-3",
                  "entries": {"uid-gone": {"app": "1"}, "uid-live": {"app": "2"}}, "checksum": 1}
    reads: list[str] = []

    def ssh(_state: object, node: str, command: str) -> SimpleNamespace:
        if command.startswith("cat "):
            reads.append(node)
            if len(reads) == 3:  # the reconcile loop ran: the deleted pod's CPUs back in the shared pool
                checkpoint["entries"].pop("uid-gone")
            return SimpleNamespace(returncode=0, stdout=json.dumps(checkpoint), stderr="")
        return SimpleNamespace(returncode=0, stdout=f"sums of {sorted(checkpoint['entries'])}", stderr="")

    pod = SimpleNamespace(metadata=SimpleNamespace(uid="uid-live", deletion_timestamp=None),
                          status=SimpleNamespace(phase="Running"))
    core = SimpleNamespace(list_pod_for_all_namespaces=lambda field_selector: SimpleNamespace(items=[pod]))
    monkeypatch.setattr(outage, "ssh", ssh)
    monkeypatch.setattr(outage, "cordon_state", lambda _core, nodes: {n: (False, None) for n in nodes})
    monkeypatch.setattr(faults.time, "sleep", lambda _s: None)
    _, (sums, cordons) = outage.settled_snapshot(Path("state"), core, ["worker-1"])
    assert len(reads) == 3
    assert sums == {"worker-1": "sums of ['uid-live']"} and cordons == {"worker-1": (False, None)}
    none_policy = json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 2})
    assert outage.stale_cpu_entries(none_policy, set()) == set()
