"""The kubelet policy of the host a stage runs on: its NUMA topology read from sysfs (a fact), the
kubelet version of its distribution, and `kubelet_settings` from host data, through numalab.model.kubelet.
Shared by the upstream node stage, the RKE2 config stage and verify, so all three compute the same."""

from __future__ import annotations

from numa_align.sysfs import HostTopology, SysfsError, read_host
from pyinfra import host
from pyinfra.api.exceptions import DeployError
from pyinfra.facts.server import Command

from numalab.deploy import context, controller
from numalab.deploy.facts import NumaSysfs
from numalab.k8s.binaries import GO_PREFIX
from numalab.model.errors import ValidationError
from numalab.model.kubelet import KubeletPolicy, KubeletSettings, kubelet_configuration, kubelet_policy
from numalab.model.topology import Topology
from numalab.placement.api_objects import kubelet_policies
from numalab.sysfs import topology_from_host

CGROUP_VERSION_COMMAND = (
    "if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo 2; elif [ -d /sys/fs/cgroup ]; then echo 1; fi"
)


def host_sysfs() -> HostTopology:
    """What numa-align's reader reads from this host's /sys; an unreadable file fails naming host and file."""
    try:
        return read_host(context.once(host, "sysfs", lambda: host.get_fact(NumaSysfs)))
    except SysfsError as exc:
        raise DeployError(f"{context.node_name(host)}: {exc}") from None


def node_topology() -> Topology:
    """The host's topology from sysfs; on a lab guest it must match the shape the lab declared."""
    name = context.node_name(host)
    try:
        found = topology_from_host(host_sysfs(), where=f"{name}: /sys/devices/system")
    except ValidationError as exc:
        raise DeployError(str(exc)) from None
    declared = host.data.get("numa")
    if declared:
        expected = Topology.from_dict(declared, where=f"{name}: declared shape")
        if not _same_shape(found, expected):
            raise DeployError(
                f"{name}: NUMA topology in the guest ({_shape(found)}) is not the declared one ({_shape(expected)}); "
                "was the domain defined from another inventory?"
            )
    return found


def _shape(topology: Topology) -> str:
    return " ".join(f"node{c.id}:cpus {c.cpulist},{c.memory >> 20}Mi" for c in topology.cells)


def _same_shape(found: Topology, expected: Topology) -> bool:
    """Same node ids, online and offline cpus and cores; memory within 10 % (the guest's kernel keeps some
    of node 0 for itself)."""
    def cpus(topology: Topology) -> list:
        return [(c.id, c.cpus, c.offline_cpus) for c in topology.cells]

    if cpus(found) != cpus(expected) or found.core_list != expected.core_list:
        return False
    return all(abs(f.memory - e.memory) <= e.memory // 10 for f, e in zip(found.cells, expected.cells, strict=True))


def kubelet_version() -> str:
    """upstream: the pinned release of a `go:` spec (nothing built to know it), else what the binaries
    report; rke2: the Kubernetes release of the pinned rke2_version."""
    if context.chosen_distribution(host)[0] == "rke2":
        return context.rke2_install(host).kubelet_version
    spec = controller.binaries_spec(host)
    if spec.startswith(GO_PREFIX):
        return spec.removeprefix(GO_PREFIX)
    return controller.binaries(host).version


def cgroup_version() -> int | None:
    """2 on a unified hierarchy, 1 on a legacy one, None when /sys/fs/cgroup is not there."""
    found = context.once(host, "cgroup", lambda: host.get_fact(Command, CGROUP_VERSION_COMMAND))
    return int(found) if found in ("1", "2") else None


def swap_active() -> bool:
    return bool(host.get_fact(Command, "tail -n +2 /proc/swaps"))


def node_policy(topology: Topology | None = None) -> KubeletPolicy:
    """The checked policy for this host; a rule it breaks fails the run before anything is written."""
    name = context.node_name(host)
    settings = KubeletSettings.from_dict(
        {**context.data(host, "kubelet_settings"), "kubelet-version": kubelet_version()},
        where=f"{name}: kubelet_settings",
    )
    try:
        return kubelet_policy(topology or node_topology(), settings, allow_newer=allow_newer(),
                              cgroup_version=cgroup_version())
    except ValidationError as exc:
        raise DeployError(f"{name}: {exc}") from None


def allow_newer() -> bool:
    """Host data `kubelet_allow_newer: true` applies the newest known kubelet's rules to a newer kubelet."""
    return bool(context.data(host, "kubelet_allow_newer"))


def expected_policies(policy: KubeletPolicy) -> dict[str, str]:
    """The manager policies the kubelet's /configz must show for `policy`."""
    return kubelet_policies({"kubeletconfig": kubelet_configuration(policy)})
