"""Which kubelet version accepts which manager setting, and which feature gates it needs for it.

One table, FEATURES, holds every versioned fact the policy relies on; the policy asks `gates_for` before it
emits a setting, so an older kubelet is never handed a setting it would refuse or silently ignore (a 1.21
kubelet without the MemoryManager gate starts fine and never pins memory). The stages come from the
kubelet sources of each release (pkg/features, pkg/kubelet/cm/*/policy_options.go, cmd/kubelet options).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from numalab.model.errors import ValidationError

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


@dataclass(frozen=True, order=True)
class KubeletVersion:
    """A kubelet's major.minor: what a setting's availability depends on (patches change none of it)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | KubeletVersion, where: str = "kubelet-version") -> KubeletVersion:
        """`v1.36.3`, `1.31`, `v1.31.4+rke2r1`, `v1.33.0-rc.1` -> KubeletVersion; anything else is refused."""
        if isinstance(text, KubeletVersion):
            return text
        if isinstance(text, float):
            raise ValidationError(where, f"{text!r}: quote the version (YAML reads 1.30 as the number 1.3)")
        match = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ValidationError(where, f"{text!r} is not a kubelet version (expected e.g. v1.36.3 or v1.31.4+rke2r1)")
        major, minor = int(match[1]), int(match[2])
        if major != 1:
            raise ValidationError(where, f"{text!r}: only Kubernetes 1.x kubelets exist")
        return cls(major, minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


OLDEST_KNOWN = KubeletVersion(1, 18)  # the Topology Manager is beta and on by default from here
NEWEST_KNOWN = KubeletVersion(1, 36)

CPU_ALPHA = "CPUManagerPolicyAlphaOptions"
TOPOLOGY_ALPHA = "TopologyManagerPolicyAlphaOptions"


@dataclass(frozen=True)
class Stage:
    """From `since` on, a setting has this maturity and works once `gates` (all off by default) are set true."""

    since: KubeletVersion
    maturity: str
    gates: tuple[str, ...] = ()


def _stages(*rows: tuple[str, str] | tuple[str, str, tuple[str, ...]]) -> tuple[Stage, ...]:
    return tuple(Stage(KubeletVersion.parse(row[0]), row[1], *row[2:]) for row in rows)


# Keys are the settings paths they govern. Beta and GA stages need no gate: their gates are on by default.
# A gate listed only for the stage that needs it is never written for a later kubelet, which may no longer
# know it (MemoryManager is gone in 1.36).
FEATURES: Mapping[str, tuple[Stage, ...]] = {
    "topology-manager-policy": _stages(("1.18", "beta"), ("1.27", "GA")),
    "topology-manager-scope": _stages(("1.20", "beta"), ("1.27", "GA")),
    "memory-manager-policy": _stages(("1.21", "alpha", ("MemoryManager",)), ("1.22", "beta"), ("1.32", "GA")),
    "cpu-manager-policy-options": _stages(
        ("1.22", "alpha", ("CPUManagerPolicyOptions",)), ("1.23", "beta"), ("1.33", "GA")
    ),
    "cpu-manager-policy-options.full-pcpus-only": _stages(("1.22", "alpha"), ("1.23", "beta"), ("1.33", "GA")),
    "cpu-manager-policy-options.distribute-cpus-across-numa": _stages(
        ("1.23", "alpha", (CPU_ALPHA,)), ("1.33", "beta")
    ),
    "cpu-manager-policy-options.align-by-socket": _stages(("1.25", "alpha", (CPU_ALPHA,))),
    "cpu-manager-policy-options.distribute-cpus-across-cores": _stages(("1.31", "alpha", (CPU_ALPHA,))),
    "cpu-manager-policy-options.strict-cpu-reservation": _stages(
        ("1.32", "alpha", (CPU_ALPHA,)), ("1.33", "beta"), ("1.35", "GA")
    ),
    "cpu-manager-policy-options.prefer-align-cpus-by-uncorecache": _stages(
        ("1.32", "alpha", (CPU_ALPHA,)), ("1.34", "beta"), ("1.36", "GA")
    ),
    "topology-manager-policy-options": _stages(
        ("1.26", "alpha", ("TopologyManagerPolicyOptions",)), ("1.28", "beta"), ("1.32", "GA")
    ),
    "topology-manager-policy-options.prefer-closest-numa-nodes": _stages(
        ("1.26", "alpha", (TOPOLOGY_ALPHA,)), ("1.28", "beta"), ("1.32", "GA")
    ),
    "topology-manager-policy-options.max-allowable-numa-nodes": _stages(("1.31", "beta"), ("1.35", "GA")),
}

# Kubelet flags by the first release that no longer has them; the policy must never write one of these.
REMOVED_FLAGS: Mapping[str, KubeletVersion] = {
    flag: KubeletVersion.parse(version)
    for version, flags in (
        ("1.19", "bootstrap-checkpoint-path experimental-dockershim"),
        ("1.21", "enable-cadvisor-json-endpoints"),
        ("1.22", "chaos-chance redirect-container-streaming"),
        ("1.23", "experimental-bootstrap-kubeconfig seccomp-profile-root"),
        (
            "1.24",
            "cni-bin-dir cni-cache-dir cni-conf-dir docker-endpoint dynamic-config-dir "
            "experimental-check-node-capabilities-before-mount experimental-dockershim-root-directory "
            "image-pull-progress-deadline network-plugin network-plugin-mtu non-masquerade-cidr "
            "really-crash-for-testing",
        ),
        ("1.25", "experimental-kernel-memcg-notification"),
        ("1.27", "container-runtime master-service-namespace"),
        ("1.31", "iptables-drop-bit iptables-masquerade-bit keep-terminated-pod-volumes"),
        ("1.34", "cloud-config register-schedulable"),
        ("1.35", "pod-infra-container-image"),
    )
    for flag in flags.split()
}

# failCgroupV1 (flag fail-cgroupv1) exists from 1.31 and defaults to true from 1.35: such a kubelet will not
# start on a cgroup v1 host unless the node's configuration sets failCgroupV1: false.
FAIL_CGROUP_V1_SINCE = KubeletVersion(1, 31)
FAILS_ON_CGROUP_V1_FROM = KubeletVersion(1, 35)


def stage(feature: str, version: KubeletVersion) -> Stage | None:
    """The stage `feature` is at in `version`, or None if that kubelet does not have it yet."""
    current = None
    for candidate in FEATURES[feature]:
        if candidate.since <= version:
            current = candidate
    return current


def first_version(feature: str) -> KubeletVersion:
    return FEATURES[feature][0].since


def gates_for(feature: str, version: KubeletVersion, where: str, what: str) -> tuple[str, ...]:
    """The gates `version` needs set true for `feature`; refused (naming the first version) if it has none."""
    found = stage(feature, version)
    if found is None:
        raise ValidationError(
            where, f"{what} needs kubelet {first_version(feature)} or newer; kubelet-version is {version}"
        )
    return found.gates


def check_known(version: KubeletVersion, allow_newer: bool = False, where: str = "settings.kubelet-version") -> None:
    """Refuse a kubelet outside the table: older ones lack the managers, newer ones may have changed them."""
    if version < OLDEST_KNOWN:
        raise ValidationError(
            where,
            f"kubelet {version} is older than numa-lab supports ({OLDEST_KNOWN} to {NEWEST_KNOWN}): "
            "its Topology Manager is alpha and off",
        )
    if version > NEWEST_KNOWN and not allow_newer:
        raise ValidationError(
            where,
            f"unknown kubelet version {version}: numa-lab knows kubelets {OLDEST_KNOWN} to {NEWEST_KNOWN}; "
            f"to apply the {NEWEST_KNOWN} rules to it, set kubelet_allow_newer: true in the host's data "
            "(or pass --allow-newer to numalab kubelet-args / preflight)",
        )


def removed_flags(args: Iterable[str], version: KubeletVersion) -> list[str]:
    """The kubelet args (name=value, dashes optional) naming a flag `version` no longer has."""
    out = []
    for arg in args:
        name = arg.lstrip("-").partition("=")[0]
        if name in REMOVED_FLAGS and REMOVED_FLAGS[name] <= version:
            out.append(arg)
    return out


def fails_on_cgroup_v1(version: KubeletVersion) -> bool:
    """Whether this kubelet refuses to start on a cgroup v1 host unless told failCgroupV1: false."""
    return version >= FAILS_ON_CGROUP_V1_FROM
