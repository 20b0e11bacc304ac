"""The fault table the cluster test prints: one line per case, in the order run, the columns the issue asks."""

from __future__ import annotations

import pytest

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

    monkeypatch.setattr(faults, "ssh", ssh)
    journal[:] = [f"{at - 3:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-1\"",
                  f"{at + 1:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-3\"",
                  f"{at + 2:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                  "node=\"worker-1\" uid=\"uid-old\""]
    assert faults.cache_took(None, "worker-1", made) == ""
    assert "--since @1795716009" in asked[0]
    journal.append(f"{at + 4:.6f} server numa-scheduler[9]: I1126 \"flushing\" node=\"worker-1\"")
    assert faults.cache_took(None, "worker-1", made) == "upstream's resync: the node was marked for it"
    journal.insert(0, f"{at + 3:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                      "node=\"worker-1\" reason=\"made again\" uid-new")
    assert faults.cache_took(None, "worker-1", made) == "numa-lab's adopter"
    journal.insert(0, f"{at + 2:.6f} server numa-scheduler[9]: I1126 \"adopting NodeResourceTopology\" "
                      "node=\"worker-1\" reason=\"marked for resync with no pod bound (upstream skips it), its "
                      "object's fingerprint the empty set's\" uid=\"uid-new\"")
    assert faults.cache_took(None, "worker-1", made) == "numa-lab's adopter, the node idle"


def test_a_flush_counts_only_after_the_mark() -> None:
    """The stuck-pod case reads the lines from the first mark on: which flush took the node back."""
    said = ['"flushing" node="worker-1"', '"marked with foreign pods" node="worker-1"',
            '"adopting NodeResourceTopology" node="worker-1" reason="marked for resync with no pod bound (upstream '
            "skips it), its object's fingerprint the empty set's\""]
    assert faults.took(said) == "upstream's resync: the node was marked for it"
    assert faults.took(said[1:]) == "numa-lab's adopter, the node idle"
    assert faults.took(said[1:2]) == ""
