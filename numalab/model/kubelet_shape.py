"""Rules the kubelet applies to the machine's shape at start-up, not to its flags alone: CPU Manager options
against sockets, NUMA nodes and the Topology Manager policy, and the cgroup version. Each message says what
the kubelet would do, so a refused host is named before anything is written to it.
"""

from __future__ import annotations

from numa_align.cpulist import format_cpulist

from numalab.model.errors import ValidationError
from numalab.model.kubelet_settings import KubeletSettings
from numalab.model.kubelet_versions import FAILS_ON_CGROUP_V1_FROM, KubeletVersion, fails_on_cgroup_v1
from numalab.model.topology import Topology

# Pairs the kubelet's static policy refuses together ("can not be used at the same time").
EXCLUSIVE_CPU_OPTIONS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)


def check_cpu_options_shape(topology: Topology, s: KubeletSettings) -> None:
    """cpu-manager-policy-options as the kubelet checks them against each other and the machine."""
    where = "settings.cpu-manager-policy-options"
    on = {name for name, value in s.cpu_manager_policy_options.items() if value == "true"}
    for first, second in EXCLUSIVE_CPU_OPTIONS:
        if first in on and second in on:
            raise ValidationError(where, f"{first} and {second} cannot be used together (the kubelet refuses both)")
    if "full-pcpus-only" in on:
        check_whole_cores(topology, f"{where}.full-pcpus-only")
    if "align-by-socket" not in on:
        return
    if s.topology_manager_policy == "single-numa-node":
        raise ValidationError(f"{where}.align-by-socket",
                              "the kubelet refuses align-by-socket with topology-manager-policy single-numa-node")
    sockets = len(set(topology.packages.values())) if topology.packages else None
    numa = len(topology.cpu_cells)
    if sockets is not None and sockets > numa:
        raise ValidationError(f"{where}.align-by-socket",
                              f"this node has {sockets} sockets but {numa} NUMA nodes with CPUs; the kubelet refuses "
                              "align-by-socket where sockets outnumber NUMA nodes")


def kubelet_cpus_per_core(topology: Topology) -> int:
    """The kubelet's CPUTopology.CPUsPerCore(): online CPUs // cores with an online CPU (integer division, as
    cadvisor counts only online threads), so one offline sibling among 2-thread cores gives 1."""
    cores = topology.core_list
    return len(topology.cpus) // len(cores) if cores else 0


def check_whole_cores(topology: Topology, where: str) -> None:
    """full-pcpus-only asks whole cores in multiples of CPUsPerCore; where an offline sibling leaves a core
    half online, the kubelet's CPUsPerCore drops below the real threads per core and pods get split cores."""
    per_core = kubelet_cpus_per_core(topology)
    if per_core == topology.threads_per_core:
        return
    partial = [core for core in topology.core_list if len(core) < topology.threads_per_core]
    shown = ", ".join(format_cpulist(core) for core in partial[:4])
    raise ValidationError(
        where,
        f"cores with {topology.threads_per_core} online threads sit beside cores with fewer (online: {shown}; "
        f"offline CPUs {format_cpulist(topology.offline_cpus)}), so the kubelet counts {len(topology.cpus)} CPUs / "
        f"{len(topology.core_list)} cores = {per_core} CPU(s) per core and full-pcpus-only would hand out split "
        "cores; take whole cores offline (or none), or drop full-pcpus-only",
    )


def check_cgroup(version: KubeletVersion, cgroup_version: int | None) -> None:
    """Kubelets from 1.35 refuse to start on cgroup v1 (failCgroupV1 defaults to true)."""
    if cgroup_version == 1 and fails_on_cgroup_v1(version):
        raise ValidationError(
            "host.cgroup",
            f"this host runs cgroup v1 and kubelet {version} refuses to start on it (kubelets from "
            f"{FAILS_ON_CGROUP_V1_FROM} dropped cgroup v1); boot it with cgroup v2 "
            "(systemd.unified_cgroup_hierarchy=1) or pin an older kubelet",
        )
