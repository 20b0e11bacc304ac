"""The binaries cache holding an entry with its own set of binaries (as CoreDNS's entry does)."""

from __future__ import annotations

import json

import pytest

from numalab.k8s.cache import NotCached, cached_entry, entry_problem, read_sums
from tests.k8s.fakebinaries import RecordingProgress

NAMES = ("alpha", "beta")


class Filler:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, work):
        self.calls += 1
        for name in NAMES:
            (work / "bin" / name).write_text(f"#!/bin/sh\necho {name}\n")
        return {"source": "test"}


def test_entry_with_its_own_binaries_is_filled_checked_and_rebuilt_when_damaged(tmp_path):
    fill = Filler()
    entry = cached_entry(tmp_path, "custom", fill, RecordingProgress(), binaries=NAMES)
    assert sorted(read_sums(entry)) == ["alpha", "beta"]
    assert (entry / "SHA256SUMS").read_text().splitlines()[1].endswith("  bin/beta")
    assert json.loads((entry / "manifest.json").read_text())["source"] == "test"
    assert entry_problem(entry, binaries=NAMES) is None
    # The default set (the Kubernetes binaries) is not what this entry holds.
    assert entry_problem(entry) == "SHA256SUMS lists no kubelet"
    assert cached_entry(tmp_path, "custom", fill, RecordingProgress(), binaries=NAMES) == entry
    assert fill.calls == 1

    with (entry / "bin" / "beta").open("a") as binary:
        binary.write("# changed\n")
    assert entry_problem(entry, binaries=NAMES).startswith("bin/beta has sha256 ")
    progress = RecordingProgress()
    cached_entry(tmp_path, "custom", fill, progress, binaries=NAMES)
    assert fill.calls == 2 and progress.saw("is damaged (bin/beta has sha256")
    assert entry_problem(entry, binaries=NAMES) is None


def test_entry_missing_one_of_its_binaries_is_damaged(tmp_path):
    entry = cached_entry(tmp_path, "custom", Filler(), RecordingProgress(), binaries=NAMES)
    (entry / "bin" / "alpha").unlink()
    assert entry_problem(entry, binaries=NAMES) == "bin/alpha is missing"
    with pytest.raises(NotCached, match="other is not in the cache"):
        cached_entry(tmp_path, "other", Filler(), RecordingProgress(), build=False, binaries=NAMES)
