"""Prometheus as the metrics stage configures it: one numa-align target per node it can reach, each labelled
with its node, every 5 s; nodes it cannot reach left out with the reason; on by default only in an upstream lab."""

from __future__ import annotations

import re

import pytest
import yaml
from pyinfra.api.exceptions import DeployError

from numalab.deploy.context import runs_metrics
from numalab.deploy.metrics import MARK, RULES, RULES_SOURCE, prometheus_args, prometheus_config
from numalab.model.cluster import Cluster, cluster_from_groups
from numalab.model.errors import ValidationError
from numalab.model.metrics import NODE_LABEL, ScrapePlan, ScrapeTarget, scrape_plan
from tests.deploy.test_context import FakeHost

LAB = {"kvm_lab": {"settings": {}}}


def test_every_node_that_runs_pods_is_a_target_at_the_plugins_default_port(cluster: Cluster) -> None:
    plan = scrape_plan(cluster, {})
    assert plan.targets == (ScrapeTarget("worker-a", "10.77.0.11:9201"), ScrapeTarget("worker-b", "10.77.0.12:9201"))
    assert plan.left_out == {}


def test_the_port_and_address_follow_numa_metrics_addr(cluster: Cluster) -> None:
    settings = {"worker-a": {"NUMA_METRICS_ADDR": ":9333"}, "worker-b": {"NUMA_METRICS_ADDR": "0.0.0.0:9444"}}
    assert [t.target for t in scrape_plan(cluster, settings).targets] == ["10.77.0.11:9333", "10.77.0.12:9444"]
    given = {"worker-a": {"NUMA_METRICS_ADDR": "10.77.0.11:9201"}, "worker-b": {"NUMA_METRICS_ADDR": "[fd00::2]:9201"}}
    assert [t.target for t in scrape_plan(cluster, given).targets] == ["10.77.0.11:9201", "[fd00::2]:9201"]


def test_nodes_prometheus_cannot_reach_are_left_out_with_the_reason(cluster: Cluster) -> None:
    disabled = scrape_plan(cluster, {"worker-a": {"NUMA_METRICS_ADDR": ""}})
    assert [t.node for t in disabled.targets] == ["worker-b"]
    assert "disabled" in disabled.left_out["worker-a"]
    loopback = scrape_plan(cluster, {"worker-b": {"NUMA_METRICS_ADDR": "127.0.0.1:9201"}})
    assert [t.node for t in loopback.targets] == ["worker-a"] and "loopback" in loopback.left_out["worker-b"]
    pods = scrape_plan(cluster, {}, daemonset={"worker-a", "worker-b"})
    assert pods.targets == () and set(pods.left_out) == {"worker-a", "worker-b"}
    assert "DaemonSet" in pods.left_out["worker-a"]


def test_a_server_that_runs_pods_is_scraped_too(groups) -> None:
    groups["rke2_servers"] = [("server", "10.77.0.10", {"k8s_server_runs_pods": True})]
    assert [t.node for t in scrape_plan(cluster_from_groups("t", groups), {}).targets] == [
        "server", "worker-a", "worker-b"]


@pytest.mark.parametrize(("settings", "field"), [
    ({"worker-a": {"NUMA_METRICS_ADDR": "9201"}}, "worker-a.numa_align_settings.NUMA_METRICS_ADDR"),
    ({"worker-b": {"NUMA_METRICS_ADDR": "host:99999"}}, "worker-b.numa_align_settings.NUMA_METRICS_ADDR"),
    ({"worker-a": ["NUMA_METRICS_ADDR=:9201"]}, "worker-a.numa_align_settings"),
    ({"registry": {}}, "registry.numa_align_settings"),
])
def test_bad_settings_are_refused_naming_the_field(cluster: Cluster, settings: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        scrape_plan(cluster, settings)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ") and "NUMA_METRICS_ADDR: " not in caught.value.message


def test_the_config_scrapes_each_node_every_5s_labelled_with_its_name(cluster: Cluster) -> None:
    text = prometheus_config(scrape_plan(cluster, {}))
    assert MARK in text
    config = yaml.safe_load(text)
    assert config["global"]["scrape_interval"] == "5s" and config["global"]["scrape_timeout"] == "4s"
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "numa-align"
    assert job["static_configs"] == [
        {"targets": ["10.77.0.11:9201"], "labels": {NODE_LABEL: "worker-a"}},
        {"targets": ["10.77.0.12:9201"], "labels": {NODE_LABEL: "worker-b"}},
    ]
    assert NODE_LABEL != "node"  # the gauges' own `node` label (the NUMA node id) would be renamed exported_node


def test_the_config_loads_numa_aligns_alerting_rules_labelled_as_the_targets_are(cluster: Cluster) -> None:
    """The rules file the stage installs is the one the config names; its alerts name the node by the label
    the scrape config gives each target (a label Prometheus lacks would render empty in the alert)."""
    assert yaml.safe_load(prometheus_config(scrape_plan(cluster, {})))["rule_files"] == [RULES]
    rules = RULES_SOURCE.read_text()
    assert "$labels." + NODE_LABEL in rules
    assert {label for label in re.findall(r"\$labels\.(\w+)", rules)} == {NODE_LABEL}


def test_with_no_target_the_job_is_still_valid() -> None:
    (job,) = yaml.safe_load(prometheus_config(ScrapePlan(())))["scrape_configs"]
    assert job["static_configs"] == []


def test_only_a_short_retention_is_passed() -> None:
    lines = [line for line in prometheus_args().splitlines() if not line.startswith("#")]
    assert lines == ['ARGS="--storage.tsdb.retention.time=1d"']
    assert MARK in prometheus_args()


def test_on_by_default_in_an_upstream_lab_only() -> None:
    assert runs_metrics(FakeHost(LAB))
    assert not runs_metrics(FakeHost())  # a bare-metal registry host may have no Prometheus, or its own
    assert not runs_metrics(FakeHost({**LAB, "k8s_distribution": "rke2"}))
    assert runs_metrics(FakeHost({"numa_metrics": True}))
    assert not runs_metrics(FakeHost({**LAB, "numa_metrics": False}))
    with pytest.raises(DeployError, match="numa_metrics is 'on'"):
        runs_metrics(FakeHost({"numa_metrics": "on"}))
