"""NodeResourceTopology in the deploy: where numa-align publishes by default, the CRD as its module ships it
(checked before it is applied), and the least rights numa-align gets to publish."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from numa_align import guard_events, leases
from numa_align.nrt_api import GROUP, PLURAL, VERSION
from pyinfra.api.exceptions import DeployError

from numalab.deploy.context import publishes_nrt
from numalab.deploy.manifests import manifest_checksum
from numalab.deploy.topology_api import access_manifest
from numalab.k8s import nrt_crd
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import ModuleSource
from numalab.model.errors import ValidationError
from numalab.model.plugin_settings import nrt_settings, plugin_settings
from tests.deploy.test_context import FakeHost

# As the module's manifests/crd.yaml has it, written out: it pins numa_align.nrt_api to the CRD numa-lab applies.
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "noderesourcetopologies.topology.node.k8s.io"},
    "spec": {"group": "topology.node.k8s.io", "scope": "Cluster", "names": {"plural": "noderesourcetopologies"},
             "versions": [{"name": "v1alpha1", "served": True}, {"name": "v1alpha2", "served": True,
                                                                 "storage": True}]},
}
RKE2 = {"k8s_distribution": "rke2"}


def test_nrt_is_on_by_default_wherever_numa_align_has_credentials() -> None:
    assert publishes_nrt(FakeHost())  # upstream: numa-lab's PKI issues the unit's certificate
    assert publishes_nrt(FakeHost({**RKE2, "numa_align_install": "daemonset"}))  # its ServiceAccount
    assert not publishes_nrt(FakeHost(RKE2))  # RKE2's unit: no credentials numa-lab can issue
    assert not publishes_nrt(FakeHost({"numa_align_nrt": False}))


def test_nrt_asked_where_it_cannot_publish_or_not_a_boolean_is_refused_naming_the_key() -> None:
    with pytest.raises(DeployError, match="numa_align_nrt is true, but numa-align's systemd unit has no credentials"):
        publishes_nrt(FakeHost({**RKE2, "numa_align_nrt": True}))
    with pytest.raises(DeployError, match="numa_align_nrt is 'yes'; expected true or false"):
        publishes_nrt(FakeHost({"numa_align_nrt": "yes"}))


def test_the_plugin_gets_the_kubelets_policy_and_scope_and_the_user_cannot_override_them() -> None:
    assert nrt_settings("single-numa-node", "pod") == {
        "NUMA_ALIGN_NRT": "true", "NUMA_ALIGN_TOPOLOGY_POLICY": "single-numa-node", "NUMA_ALIGN_TOPOLOGY_SCOPE": "pod"}
    unit = nrt_settings("restricted", None, "/etc/numa-align/kubeconfig", "worker-1")
    assert unit["NUMA_ALIGN_TOPOLOGY_SCOPE"] == "container"  # the kubelet's default scope
    assert unit["NUMA_ALIGN_KUBECONFIG"] == "/etc/numa-align/kubeconfig" and unit["NUMA_ALIGN_NODE_NAME"] == "worker-1"
    with pytest.raises(ValidationError, match="numa_align_settings.NUMA_ALIGN_TOPOLOGY_POLICY"):
        plugin_settings({"NUMA_ALIGN_TOPOLOGY_POLICY": "none"}, frozenset())


def test_the_crd_is_read_from_its_module_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "manifests").mkdir()
    crd_file = tmp_path / "manifests" / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(CRD))
    asked = []

    def download(version, env, module):  # noqa: ANN001, ANN202 - the source's signature
        asked.append(f"{module}@{version}")
        return ModuleSource(version, tmp_path, "2024-01-01T00:00:00Z", "h1:x")

    monkeypatch.setattr(nrt_crd, "download_module", download)
    assert nrt_crd.nrt_crd({}) == CRD
    assert asked == ["github.com/k8stopologyawareschedwg/noderesourcetopology-api@v0.1.3"]
    namespaced = copy.deepcopy(CRD)
    namespaced["spec"]["scope"] = "Namespaced"
    crd_file.write_text(yaml.safe_dump(namespaced))
    with pytest.raises(BinariesError, match="manifests/crd.yaml is refused: its group/scope is"):
        nrt_crd.nrt_crd({})
    crd_file.write_text(yaml.safe_dump(CRD) + "---\n" + yaml.safe_dump(CRD))
    with pytest.raises(BinariesError, match="holds 2 objects"):
        nrt_crd.nrt_crd({})


def test_crd_problems_are_named() -> None:
    assert nrt_crd.crd_problem(CRD) is None
    assert nrt_crd.crd_problem({"kind": "ConfigMap"}) == "it is not a CustomResourceDefinition"
    only_v1 = copy.deepcopy(CRD)
    only_v1["spec"]["versions"] = [{"name": "v1alpha1", "served": True}]
    assert nrt_crd.crd_problem(only_v1) == f"it serves ['v1alpha1'], not {VERSION}"


def kinds(text: str) -> dict[str, dict]:
    """The manifest's objects by kind, the namespaced ones by kind/namespace."""
    docs = yaml.safe_load_all(text)
    return {"/".join(filter(None, (doc["kind"], doc["metadata"].get("namespace")))): doc for doc in docs}


def test_numa_align_may_read_nodes_list_pods_write_nrt_objects_its_leases_and_events_and_nothing_more() -> None:
    crd_text = yaml.safe_dump(CRD)
    docs = kinds(access_manifest(crd_text, "numa-lab:numa-align"))
    assert sorted(docs) == ["ClusterRole", "ClusterRoleBinding", "Role/default", "Role/kube-system",
                            "RoleBinding/default", "RoleBinding/kube-system"]
    rules = {(group, resource): set(rule["verbs"]) for rule in docs["ClusterRole"]["rules"]
             for group in rule["apiGroups"] for resource in rule["resources"]}
    assert rules == {("", "nodes"): {"get"}, ("", "pods"): {"list"},
                     (GROUP, PLURAL): {"get", "create", "update"}}
    # the Lease only in the namespace numa-align renews it in
    assert leases.NAMESPACE == "kube-system"
    assert docs["Role/kube-system"]["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                                  "verbs": ["get", "create", "update"]}]
    # Events (the kubelet guard's moves) only created, only in the namespace numa-align posts them in
    assert guard_events.NAMESPACE == "default"
    assert docs["Role/default"]["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    subjects = [{"kind": "ServiceAccount", "name": "numa-align", "namespace": "kube-system"},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "numa-lab:numa-align"}]
    assert docs["ClusterRoleBinding"]["subjects"] == subjects
    for namespace in ("kube-system", "default"):
        binding = docs[f"RoleBinding/{namespace}"]
        assert binding["roleRef"]["name"] == docs[f"Role/{namespace}"]["metadata"]["name"]
        assert binding["subjects"] == subjects
    rke2 = kinds(access_manifest(crd_text, None))
    for binding in ("ClusterRoleBinding", "RoleBinding/kube-system", "RoleBinding/default"):
        assert [s["kind"] for s in rke2[binding]["subjects"]] == ["ServiceAccount"]
    # the checksum follows the CRD too: a new CRD version is applied even when the rights are the same
    other = access_manifest(yaml.safe_dump({**CRD, "metadata": {"name": "x"}}), "numa-lab:numa-align")
    same = access_manifest(crd_text, "numa-lab:numa-align")
    assert manifest_checksum(other, "ClusterRole") != manifest_checksum(same, "ClusterRole")
