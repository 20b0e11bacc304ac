"""Which kubelet-arg entries of a user's RKE2 config files numa-lab refuses, and what the error names."""

import pytest

from numalab.model.errors import ValidationError
from numalab.model.rke2_merge import check_user_kubelet_args, flag_name, how_repeated

CONFIG = "/etc/rancher/rke2/config.yaml"
OWN = "/etc/rancher/rke2/config.yaml.d/50-numa-lab.yaml"
SITE = "/etc/rancher/rke2/config.yaml.d/10-site.yaml"
LATE = "/etc/rancher/rke2/config.yaml.d/90-late.yaml"
OURS = {OWN: {"kubelet-arg+": ["cpu-manager-policy=static", "reserved-memory=0:memory=1Gi", "kube-reserved=cpu=1"]}}


@pytest.mark.parametrize("arg", [
    "reserved-memory=0:memory=512Mi", "--kube-reserved=memory=1Gi", "system-reserved=cpu=1",
    "eviction-hard=memory.available<5%", "reserved-cpus=0-1", "cpu-manager-policy=none",
    "memory-manager-policy=None", "topology-manager-policy=none", "topology-manager-scope=pod",
    "cpu-manager-policy-options=full-pcpus-only=true",
])
@pytest.mark.parametrize("key", ["kubelet-arg", "kubelet-arg+"])
def test_a_user_file_setting_a_managed_flag_is_refused_naming_file_and_flag(arg: str, key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_user_kubelet_args({SITE: {key: ["max-pods=200", arg]}, **OURS}, own=OWN)
    assert caught.value.field == SITE
    assert caught.value.message.startswith(f"kubelet-arg sets {flag_name(arg)}: the kubelet ")
    assert OWN in caught.value.message and "Nothing was written" in caught.value.message


def test_flags_numa_lab_does_not_manage_and_its_own_drop_in_pass() -> None:
    user = {CONFIG: {"kubelet-arg": ["v=2"]}, SITE: {"kubelet-arg": ["max-pods=200", "feature-gates=Foo=true"]},
            LATE: {"kubelet-arg+": ["max-pods=250"]}}
    check_user_kubelet_args({**user, **OURS}, own=OWN)


def test_a_plain_kubelet_arg_read_after_the_drop_in_is_refused_even_with_other_flags() -> None:
    with pytest.raises(ValidationError) as caught:
        check_user_kubelet_args({LATE: {"kubelet-arg": ["max-pods=200"]}, **OURS}, own=OWN)
    assert caught.value.field == LATE
    assert "a plain kubelet-arg read after 50-numa-lab.yaml replaces that file's whole list" in caught.value.message


def test_every_file_and_flag_is_named_with_how_the_kubelet_would_combine_them() -> None:
    files = {CONFIG: {"kubelet-arg": ["eviction-hard=memory.available<1Gi"]},
             SITE: {"kubelet-arg+": ["reserved-memory=0:memory=1Gi", "reserved-memory=1:memory=1Gi",
                                     "reserved-cpus=0"]}}
    with pytest.raises(ValidationError) as caught:
        check_user_kubelet_args(files, own=OWN)
    message = str(caught.value)
    assert message.startswith(f"{CONFIG}: kubelet-arg sets eviction-hard: the kubelet merges both key by key.")
    assert message.endswith(f"Also {SITE}: kubelet-arg sets reserved-memory: the kubelet adds both up, and refuses "
                            "a NUMA node given twice; kubelet-arg sets reserved-cpus: the kubelet takes the last one.")


def test_how_the_kubelet_takes_a_repeated_flag() -> None:
    assert how_repeated("kube-reserved") == how_repeated("feature-gates") == "merges both key by key"
    assert how_repeated("topology-manager-policy") == "takes the last one"
