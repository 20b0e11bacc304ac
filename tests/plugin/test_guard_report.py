"""numa-align's reading of the kubelet guard's record: this boot's entries only; an absent record or one of an
earlier boot is nothing to show; a record it cannot read is a warning naming the file, and nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from numa_align.guard_report import SetAside, set_aside_this_boot

BOOT, EARLIER = "7c1d2e3f-1111-4a4a-8b8b-0d3b1b7c0002", "0f0e8a2c-5a8e-4f5b-9d36-0d3b1b7c0001"
CPU = {"file": "/var/lib/kubelet/cpu_manager_state", "aside": f"/var/lib/kubelet/cpu_manager_state.mismatch-{BOOT}",
       "reason": "it holds CPUs 0-3 but the machine has 0-2 online (no longer there: 3)"}
MEMORY = {"file": "/var/lib/kubelet/memory_manager_state",
          "aside": f"/var/lib/kubelet/memory_manager_state.mismatch-{BOOT}",
          "reason": "NUMA node 1 memory: total 2Gi in it, 1792Mi on the machine"}


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    """(record, boot id) of a node at boot BOOT; the record not written yet."""
    (tmp_path / "boot_id").write_text(BOOT + "\n")
    return tmp_path / "kubelet-guard.json", tmp_path / "boot_id"


def test_the_entries_of_this_boot_in_their_order(paths):
    record, boot_id = paths
    record.write_text(json.dumps({"bootId": BOOT, "moved": [CPU, MEMORY]}))
    assert set_aside_this_boot(record, boot_id) == [SetAside(**CPU, boot_id=BOOT), SetAside(**MEMORY, boot_id=BOOT)]


def test_no_record_or_one_of_an_earlier_boot_is_nothing_to_show(paths, caplog):
    record, boot_id = paths
    assert set_aside_this_boot(record, boot_id) == []
    record.write_text(json.dumps({"bootId": EARLIER, "moved": [CPU]}))
    assert set_aside_this_boot(record, boot_id) == []
    assert caplog.records == []


@pytest.mark.parametrize("text", [
    "{not json",
    "[]",
    json.dumps({"moved": [CPU]}),
    json.dumps({"bootId": BOOT}),
    json.dumps({"bootId": BOOT, "moved": "cpu_manager_state"}),
    json.dumps({"bootId": BOOT, "moved": [{"file": "/var/lib/kubelet/cpu_manager_state"}]}),
    json.dumps({"bootId": BOOT, "moved": [{**CPU, "aside": None}]}),
])
def test_a_record_not_as_the_guard_writes_it_is_a_warning_naming_it(paths, caplog, text):
    record, boot_id = paths
    record.write_text(text)
    with caplog.at_level(logging.WARNING):
        assert set_aside_this_boot(record, boot_id) == []
    (warning,) = caplog.records
    assert f"the kubelet guard's record {record} is not what the guard writes" in warning.getMessage()


def test_an_unreadable_boot_id_or_record_is_a_warning(paths, caplog):
    record, boot_id = paths
    record.write_text(json.dumps({"bootId": BOOT, "moved": [CPU]}))
    boot_id.unlink()
    with caplog.at_level(logging.WARNING):
        assert set_aside_this_boot(record, boot_id) == []
        record.unlink()
        record.mkdir()  # reading it fails with IsADirectoryError
        assert set_aside_this_boot(record, boot_id) == []
    first, second = (r.getMessage() for r in caplog.records)
    assert first.startswith(f"cannot read this boot's id from {boot_id} (No such file or directory)")
    assert second.startswith(f"cannot read the kubelet guard's record {record}: [Errno 21] Is a directory")
