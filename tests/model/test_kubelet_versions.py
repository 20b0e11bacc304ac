"""The version table, checked per kubelet minor against the facts of each release (written out here by hand)."""

import pytest

from numalab.model.errors import ValidationError
from numalab.model.kubelet import (
    NEWEST_KNOWN,
    KubeletSettings,
    KubeletVersion,
    fails_on_cgroup_v1,
    kubelet_configuration,
    kubelet_policy,
    parse_kubelet_args,
    removed_flags,
)
from numalab.model.topology import Topology

TWO = Topology.from_dict(
    {"cells": [{"id": 0, "cpus": "0-3", "memory": "4Gi"}, {"id": 1, "cpus": "4-7", "memory": "4Gi"}]}
)
TEN = Topology.from_dict({"cells": [{"id": i, "cpus": str(i), "memory": "1Gi"} for i in range(10)]})
CPU_ALPHA = "CPUManagerPolicyAlphaOptions"
MINORS = range(28, 37)

# option -> (first minor that has it, last minor where it is alpha and needs CPUManagerPolicyAlphaOptions)
CPU_OPTIONS = {
    "full-pcpus-only": (22, None),
    "distribute-cpus-across-numa": (23, 32),
    "align-by-socket": (25, 36),
    "distribute-cpus-across-cores": (31, 36),
    "strict-cpu-reservation": (32, 32),
    "prefer-align-cpus-by-uncorecache": (32, 33),
}
# every topology option is beta or GA (no gate) from 1.28 on; max-allowable-numa-nodes starts at 1.31
TOPOLOGY_OPTIONS = {"prefer-closest-numa-nodes": ("true", 26), "max-allowable-numa-nodes": ("16", 31)}


def settings(version, **extra):
    return KubeletSettings.from_dict({"kubelet-version": version, **extra})


def policy(version, topology=TWO, allow_newer=False, **extra):
    return kubelet_policy(topology, settings(version, **extra), allow_newer=allow_newer)


def refused(version, topology=TWO, **extra):
    with pytest.raises(ValidationError) as err:
        policy(version, topology, **extra)
    return err.value


@pytest.mark.parametrize("minor", MINORS)
def test_defaults_are_the_same_args_for_every_minor_from_1_28(minor):
    """Memory Manager Static, pod scope, single-numa-node: all beta or GA by 1.28, so no gates and no changes."""
    result = policy(f"v1.{minor}.2")
    assert result.args == policy(str(NEWEST_KNOWN)).args
    assert result.feature_gates == {} and "featureGates" not in kubelet_configuration(result)
    assert removed_flags(result.args, result.kubelet_version) == []


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("option", sorted(CPU_OPTIONS))
def test_cpu_manager_policy_options_per_minor(minor, option):
    since, alpha_until = CPU_OPTIONS[option]
    asked = {"cpu-manager-policy-options": {option: "true"}}
    if option == "align-by-socket":  # the kubelet refuses it with single-numa-node
        asked["topology-manager-policy"] = "restricted"
    if minor < since:
        err = refused(f"v1.{minor}.0", **asked)
        assert err.field == f"settings.cpu-manager-policy-options.{option}"
        assert (
            f"cpu-manager-policy-options {option} needs kubelet 1.{since} or newer; kubelet-version is 1.{minor}"
            in (str(err))
        )
        return
    result = policy(f"v1.{minor}.0", **asked)
    alpha = alpha_until is not None and minor <= alpha_until
    assert result.feature_gates == ({CPU_ALPHA: True} if alpha else {})
    args = parse_kubelet_args(result.args)
    assert args["cpu-manager-policy-options"] == [f"{option}=true"]
    assert args.get("feature-gates") == ([f"{CPU_ALPHA}=true"] if alpha else None)


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("option", sorted(TOPOLOGY_OPTIONS))
def test_topology_manager_policy_options_per_minor(minor, option):
    value, since = TOPOLOGY_OPTIONS[option]
    asked = {"topology-manager-policy-options": {option: value}}
    if minor < since:
        err = refused(f"1.{minor}", **asked)
        assert err.field == f"settings.topology-manager-policy-options.{option}"
        assert f"needs kubelet 1.{since} or newer; kubelet-version is 1.{minor}" in str(err)
        return
    result = policy(f"1.{minor}", **asked)
    assert result.feature_gates == {}
    assert parse_kubelet_args(result.args)["topology-manager-policy-options"] == [f"{option}={value}"]


@pytest.mark.parametrize("minor", MINORS)
def test_more_than_eight_numa_nodes_per_minor(minor):
    if minor < 31:
        err = refused(f"1.{minor}", TEN)
        assert err.field == "settings.topology-manager-policy"
        assert f"kubelet 1.{minor} refuses more than 8" in str(err) and "needs kubelet 1.31 or newer" in str(err)
        assert policy(f"1.{minor}", TEN, **{"topology-manager-policy": "none"}).topology_manager_policy == "none"
    else:
        err = refused(f"1.{minor}", TEN)
        assert err.field == "settings.topology-manager-policy-options.max-allowable-numa-nodes"
        limited = policy(f"1.{minor}", TEN, **{"topology-manager-policy-options": {"max-allowable-numa-nodes": 10}})
        assert limited.topology_manager_policy_options == {"max-allowable-numa-nodes": "10"}


def test_1_20_has_no_memory_manager():
    err = refused("v1.20.15")
    assert err.field == "settings.memory-manager-policy"
    assert err.message == "memory-manager-policy Static needs kubelet 1.21 or newer; kubelet-version is 1.20"
    result = policy("v1.20.15", **{"memory-manager-policy": "None"})
    args = parse_kubelet_args(result.args)
    assert "memory-manager-policy" not in args and "reserved-memory" not in args
    assert args["topology-manager-scope"] == ["pod"]
    assert "memoryManagerPolicy" not in kubelet_configuration(result)


def test_1_19_knows_no_scope_but_container_is_what_it_does():
    assert refused("1.19", **{"memory-manager-policy": "None"}).field == "settings.topology-manager-scope"
    result = policy("1.19", **{"memory-manager-policy": "None", "topology-manager-scope": "container"})
    assert "topology-manager-scope" not in parse_kubelet_args(result.args)
    assert "topologyManagerScope" not in kubelet_configuration(result)


def test_1_21_memory_manager_is_alpha_and_gated():
    result = policy("v1.21.14")
    assert result.feature_gates == {"MemoryManager": True}
    assert result.args[-1] == "feature-gates=MemoryManager=true"
    assert kubelet_configuration(result)["featureGates"] == {"MemoryManager": True}
    err = refused("v1.21.14", **{"cpu-manager-policy-options": {"full-pcpus-only": "true"}})
    assert "needs kubelet 1.22 or newer" in str(err)


def test_1_22_memory_manager_is_beta_and_cpu_options_are_alpha():
    assert policy("1.22").feature_gates == {}
    result = policy("1.22", **{"cpu-manager-policy-options": {"full-pcpus-only": "true"}})
    assert result.feature_gates == {"CPUManagerPolicyOptions": True}
    err = refused("1.22", **{"cpu-manager-policy-options": {"distribute-cpus-across-numa": "true"}})
    assert err.field == "settings.cpu-manager-policy-options.distribute-cpus-across-numa"
    assert "needs kubelet 1.23" in str(err)
    assert "needs kubelet 1.26" in str(refused("1.22", **{"topology-manager-policy-options": {"x": "true"}}))


def test_1_26_topology_options_are_alpha_twice_over():
    result = policy("1.26", **{"topology-manager-policy-options": {"prefer-closest-numa-nodes": True}})
    assert result.feature_gates == {"TopologyManagerPolicyAlphaOptions": True, "TopologyManagerPolicyOptions": True}
    assert result.args[-1] == "feature-gates=TopologyManagerPolicyAlphaOptions=true,TopologyManagerPolicyOptions=true"
    both = policy(
        "1.26",
        **{
            "cpu-manager-policy-options": {"align-by-socket": "true"},
            "topology-manager-policy": "restricted",
            "topology-manager-policy-options": {"prefer-closest-numa-nodes": "false"},
        },
    )
    assert list(both.feature_gates) == [CPU_ALPHA, "TopologyManagerPolicyAlphaOptions", "TopologyManagerPolicyOptions"]
    assert "needs kubelet 1.31" in str(
        refused("1.26", **{"topology-manager-policy-options": {"max-allowable-numa-nodes": "8"}})
    )


def test_versions_outside_the_table():
    assert "older than numa-lab supports (1.18 to 1.36)" in str(refused("v1.17.0"))
    err = refused("v1.37.0")
    assert err.field == "settings.kubelet-version" and "unknown kubelet version 1.37" in str(err)
    newer = policy("v1.37.0", allow_newer=True)
    assert newer.kubelet_version == KubeletVersion(1, 37) and newer.args == policy("v1.36.3").args


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.36.3", (1, 36)),
        ("1.30", (1, 30)),
        ("v1.31.4+rke2r1", (1, 31)),
        ("v1.33.0-rc.1", (1, 33)),
        (" v1.28.15 ", (1, 28)),
    ],
)
def test_version_strings(text, expected):
    assert KubeletVersion.parse(text) == KubeletVersion(*expected)
    assert settings(text).kubelet_version == KubeletVersion(*expected)


@pytest.mark.parametrize("text", ["1", "v1", "latest", "v2.0.0", "v1.36.x", "1.30; rm", None, 1.3, ["v1.30"]])
def test_bad_version_strings_name_the_field(text):
    with pytest.raises(ValidationError) as err:
        settings(text)
    assert err.value.field == "settings.kubelet-version"
    assert "1.3" in str(err.value) or "version" in str(err.value)


def test_yaml_float_version_is_refused_with_the_reason():
    with pytest.raises(ValidationError, match="YAML reads 1.30 as the number 1.3"):
        settings(1.3)


def test_removed_flags_and_cgroup_v1():
    assert removed_flags(["--container-runtime=remote", "cpu-manager-policy=static"], KubeletVersion(1, 26)) == []
    assert removed_flags(["--container-runtime=remote"], KubeletVersion(1, 27)) == ["--container-runtime=remote"]
    assert removed_flags(["--experimental-kernel-memcg-notification"], KubeletVersion(1, 25)) == [
        "--experimental-kernel-memcg-notification"
    ]
    assert removed_flags(["pod-infra-container-image=x"], KubeletVersion(1, 34)) == []
    assert removed_flags(["pod-infra-container-image=x"], KubeletVersion(1, 35)) == ["pod-infra-container-image=x"]
    assert not fails_on_cgroup_v1(KubeletVersion(1, 34)) and fails_on_cgroup_v1(KubeletVersion(1, 35))


@pytest.mark.parametrize("minor", range(21, 37))
def test_no_version_is_handed_a_flag_it_lost(minor):
    everything = policy(
        f"1.{minor}",
        **{"cpu-manager-policy-options": {"full-pcpus-only": "true"}} if minor >= 22 else {},
    )
    assert removed_flags(everything.flags, everything.kubelet_version) == []
