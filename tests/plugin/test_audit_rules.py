"""The Prometheus rules file for the cpuset audit: valid YAML of alerting rules whose expressions name only
metrics numa-align serves, and an alert for split, drifted and unknown. (`promtool check rules` runs in the
lab, where Prometheus is.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from numa_align.metrics import Metrics

RULES = Path(__file__).resolve().parents[2] / "templates" / "k8s" / "numa-align-rules.yml"


def test_every_alert_names_metrics_numa_align_serves():
    served = {metric.name for metric in Metrics().registry.collect()}
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    named = {rule["alert"]: set(re.findall(r"numa_align_\w+", rule["expr"])) for rule in rules}
    assert named == {"NumaAlignContainerSplit": {"numa_align_containers_split"},
                     "NumaAlignCpusetDrift": {"numa_align_containers_cpuset_drift"},
                     "NumaAlignAuditUnknown": {"numa_align_audit_readable"}}
    assert set().union(*named.values()) <= served, set().union(*named.values()) - served
    for rule in rules:
        assert {"expr", "for", "labels", "annotations"} <= rule.keys(), rule["alert"]
        mentioned = set(re.findall(r"numa_align_\w+", rule["annotations"].get("description", "")))
        assert mentioned <= served, (rule["alert"], mentioned - served)
