"""`numalab top` shows numa-align's cpuset audit per node from the NRT object's `numa-align/audit` annotation:
split and drifted containers, exclusive CPUs per cell, stranded CPUs; unknown when numa-align could not read
the cgroup tree; a bad annotation is a warning, never a failure."""

from __future__ import annotations

import json

from numa_align.audit import ANNOTATION, Audit

from numalab.top.model import build_views
from numalab.top.text import as_json, format_table
from tests.top.fakes import node, nrt, zone


def audited(summary: dict | str) -> dict:
    obj = nrt("worker-1", [zone(0, cpu=(4, 4, 1)), zone(1, cpu=(4, 4, 4))])
    obj["metadata"]["annotations"] = {ANNOTATION: summary if isinstance(summary, str) else json.dumps(summary)}
    return obj


def test_the_table_and_json_show_split_drift_cells_and_stranded():
    summary = {"readable": True, "split": ["numa/app/app"], "drift": [], "cells": {"0": 3, "1": 0}, "stranded": 1}
    [view] = build_views([audited(summary)], [node("worker-1")], [])
    table = format_table([view])
    assert ("audit: 1 split (numa/app/app), 0 drifted; exclusive CPUs in cpusets node-0 3, node-1 0; "
            "stranded CPUs 1") in table
    assert as_json([view])["nodes"][0]["audit"] == {"readable": True, "split": ["numa/app/app"], "drift": [],
                                                     "cells": {"0": 3, "1": 0}, "stranded": 1, "why": None}


def test_the_plugins_own_annotation_reads_back():
    """What numa-align writes (numa_align.audit.Audit.annotation) is what top parses: one format, two ends."""
    annotation = Audit(False, stranded=2, why="cannot read the cgroup v2 root /sys/fs/cgroup").annotation()
    obj = audited("")
    obj["metadata"]["annotations"] = annotation
    [view] = build_views([obj], [node("worker-1")], [])
    assert "audit: unknown (cannot read the cgroup v2 root /sys/fs/cgroup); stranded CPUs 2" in format_table([view])
    assert view.audit is not None and not view.audit.readable


def test_no_audit_shows_no_line_and_a_bad_one_warns():
    [plain] = build_views([nrt("worker-1", [zone(0, cpu=(4, 4, 4))])], [node("worker-1")], [])
    assert plain.audit is None and "audit:" not in format_table([plain])
    [bad] = build_views([audited("{not json")], [node("worker-1")], [])
    assert bad.audit is None and any(ANNOTATION in w for w in bad.warnings)
