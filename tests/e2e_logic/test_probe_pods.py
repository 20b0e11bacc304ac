"""The pods the e2e suite creates have the QoS and numa-align requests each case needs, pass the lint
where they are meant to be pinned, and run the probe script as their command."""

from __future__ import annotations

import subprocess

import pytest

from numalab.lint.rules import LintSettings, lint_workload
from numalab.lint.workloads import workloads
from numalab.placement.pod_specs import containers, exclusive_cpus, numa_align_requests, qos_class
from numalab.placement.probe import parse_probe_output
from tests.e2e_logic.conftest import load_e2e_module

pods = load_e2e_module("probe_pods")
IMAGE = "registry.lab:5000/numa-lab/probe:1"


def lint(pod, mode):
    return lint_workload(next(workloads("e2e", [pod])), LintSettings(capacity_mode=mode))


@pytest.mark.parametrize("mode", ["slots", "cpus"])
def test_pinned_pod_is_guaranteed_with_one_exclusive_cpu_and_lints_clean(mode):
    pod = pods.pinned_pod("worker-1.lab", 2, IMAGE, mode)
    assert pod["metadata"]["name"] == "pin-worker-1-lab-n2"
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "worker-1.lab"}
    spec = pod["spec"]
    (probe,) = containers(spec)
    assert qos_class(spec) == "Guaranteed"
    assert exclusive_cpus(spec, probe) == 1
    assert numa_align_requests(probe) == {2: 1}
    assert lint(pod, mode) == []


@pytest.mark.parametrize("mode", ["slots", "cpus"])
def test_multi_container_pod_anchors_the_app_and_lints_clean(mode):
    pod = pods.multi_container_pod("w", 1, IMAGE, mode)
    spec = pod["spec"]
    refs = {ref.name: ref for ref in containers(spec)}
    assert qos_class(spec) == "Guaranteed"
    assert [ref.name for ref in containers(spec)] == ["anchor", "app", "sidecar"]
    assert numa_align_requests(refs["anchor"]) == numa_align_requests(refs["app"]) == {1: 1}
    assert numa_align_requests(refs["sidecar"]) == {}
    assert exclusive_cpus(spec, refs["sidecar"]) == 1
    assert lint(pod, mode) == []


def test_burstable_pod_gets_no_exclusive_cpu():
    spec = pods.burstable_pod("w", IMAGE)["spec"]
    assert qos_class(spec) == "Burstable"
    assert exclusive_cpus(spec, containers(spec)[0]) == 0


@pytest.mark.parametrize(("mode", "devices"), [("slots", 1), ("cpus", 5)])
def test_exhaustion_pod_asks_for_the_cpus_and_matching_devices(mode, devices):
    pod = pods.exhaustion_pod("w", 0, 5, IMAGE, mode)
    (ref,) = containers(pod["spec"])
    assert exclusive_cpus(pod["spec"], ref) == 5
    assert numa_align_requests(ref) == {0: devices}
    assert lint(pod, mode) == []


def test_every_probe_container_fits_the_restricted_pod_security_level():
    pod = pods.multi_container_pod("w", 0, IMAGE, "slots")
    for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]:
        assert c["securityContext"]["runAsNonRoot"] is True
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert c["image"] == IMAGE


def test_container_command_is_the_probe_script():
    c = pods.probe_container("probe", "1", numa_node=0, hold=False, image=IMAGE)
    assert c["command"][:2] == ["sh", "-c"]
    out = subprocess.run(c["command"], capture_output=True, text=True, check=True, env={"NUMA_NODE": "0"}).stdout
    assert parse_probe_output(out).numa_node == 0
    held = pods.probe_container("probe", "1", image=IMAGE)
    assert held["command"][2].rstrip().endswith(f"sleep {pods.HOLD_SECONDS}")


def test_pod_names_are_dns_labels():
    assert pods.dns_label("pin", "Worker_1.LAB", "n0") == "pin-worker-1-lab-n0"
    long = pods.dns_label("exhaust", "w" * 80, "n3")
    assert len(long) == 63 and not long.endswith("-")
