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
