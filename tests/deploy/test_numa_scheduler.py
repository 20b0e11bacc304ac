"""The NUMA-aware scheduler as the numa_scheduler stage renders it: a second profile with the plugin and its
reserve cache set for numa-align's fingerprint, a Lease and identity of its own with a scheduler's rights
plus NRT reads, on by default only in an upstream lab."""

from __future__ import annotations

import pytest
import yaml
from numa_align.nrt_api import GROUP, PLURAL
from pyinfra.api.exceptions import DeployError

from numalab.deploy.context import runs_numa_scheduler
from numalab.deploy.numa_scheduler import config_text, rbac_manifest
from numalab.lint.cluster_schedulers import FRESH_SECONDS
from numalab.model import numa_scheduler as model
from tests.deploy.test_context import FakeHost

LAB = {"kvm_lab": {"settings": {}}}


def test_one_profile_named_numa_aware_runs_the_plugin_with_its_reserve_cache() -> None:
    config = yaml.safe_load(config_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["leaderElection"] == {"leaderElect": True, "resourceName": "numa-scheduler",
                                        "resourceNamespace": "kube-system", "leaseDuration": "30s",
                                        "renewDeadline": "20s", "retryPeriod": "10s"}
    # renewed every 10 s, not kube-scheduler's 2 s: still several times within the lint's freshness window
    assert int(config["leaderElection"]["retryPeriod"].removesuffix("s")) * 3 <= FRESH_SECONDS
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "numa-aware"
    assert profile["plugins"] == {"multiPoint": {"enabled": [{"name": "NodeResourceTopologyMatch"}]}}
    (plugin,) = profile["pluginConfig"]
    args = plugin["args"]
    assert args["cacheResyncPeriodSeconds"] >= 5  # the reserve cache: a burst never takes a cell's CPUs twice
    assert args["cache"]["informerMode"] == "Shared"  # its pod filter replaced by numa-lab's build (bound pods)
    assert args["cache"]["foreignPodsDetect"] == "OnlyExclusiveResources"
    unit = model.numa_scheduler()
    assert f"--config={model.CONFIG}" in unit.args and "--secure-port=10260" in unit.args  # kube-scheduler: 10259
    # a pod turned away while its node was briefly marked for resync is tried again within 30 s, not 5 minutes
    assert "--pod-max-in-unschedulable-pods-duration=30s" in unit.args
    assert "--v=2" in unit.args  # the cache's marks and flushes of a node, in its journal


def test_its_rights_are_a_schedulers_plus_nrt_reads_and_its_own_lease() -> None:
    docs = list(yaml.safe_load_all(rbac_manifest()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": [GROUP], "resources": [PLURAL],
                              "verbs": ["get", "list", "watch"]}]
    bound = {d["roleRef"]["name"] for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert bound == {"numa-lab:numa-scheduler", "system:kube-scheduler", "system:volume-scheduler",
                     "numa-lab:numa-scheduler-lease", "extension-apiserver-authentication-reader"}
    assert {s["name"] for d in docs if "subjects" in d for s in d["subjects"]} == {"numa-lab:numa-scheduler"}
    lease = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "numa-lab:numa-scheduler-lease")
    named = next(rule for rule in lease["rules"] if "resourceNames" in rule)
    assert named["resourceNames"] == ["numa-scheduler"] and set(named["verbs"]) == {"get", "update"}


def test_on_by_default_in_an_upstream_lab_only_and_refused_where_it_cannot_run() -> None:
    assert runs_numa_scheduler(FakeHost(LAB))
    assert not runs_numa_scheduler(FakeHost())  # a bare-metal inventory asks for it
    assert runs_numa_scheduler(FakeHost({"numa_scheduler": True}))
    assert not runs_numa_scheduler(FakeHost({**LAB, "k8s_distribution": "rke2"}))
    with pytest.raises(DeployError, match="upstream control plane only"):
        runs_numa_scheduler(FakeHost({"numa_scheduler": True, "k8s_distribution": "rke2"}))
    with pytest.raises(DeployError, match="numa_align_nrt is off"):
        runs_numa_scheduler(FakeHost({**LAB, "numa_align_nrt": False}))
    with pytest.raises(DeployError, match="numa_scheduler is 'on'"):
        runs_numa_scheduler(FakeHost({"numa_scheduler": "on"}))
