"""numa-align's settings on a node: the kubelet's reserved CPUs reach NUMA_RESERVED_CPUS."""

import pytest

from numalab.model.errors import ValidationError
from numalab.model.plugin_settings import plugin_settings


def test_reserved_cpus_come_from_the_kubelet_policy() -> None:
    assert plugin_settings({"NUMA_CAPACITY": "cpus"}, frozenset({0, 1})) == {
        "NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins", "NUMA_CAPACITY": "cpus", "NUMA_RESERVED_CPUS": "0-1"}
    assert "NUMA_RESERVED_CPUS" not in plugin_settings(None, frozenset())


def test_the_same_value_given_is_accepted_another_is_refused() -> None:
    assert plugin_settings({"NUMA_RESERVED_CPUS": "0,8"}, frozenset({0, 8}))["NUMA_RESERVED_CPUS"] == "0,8"
    with pytest.raises(ValidationError) as err:
        plugin_settings({"NUMA_RESERVED_CPUS": "0"}, frozenset({0, 1}))
    assert err.value.field == "numa_align_settings.NUMA_RESERVED_CPUS" and "the kubelet reserves 0-1" in str(err.value)


def test_only_numa_variables() -> None:
    with pytest.raises(ValidationError, match=r"numa_align_settings.capacity: the plugin's settings are NUMA_"):
        plugin_settings({"capacity": "cpus"}, frozenset({0}))
