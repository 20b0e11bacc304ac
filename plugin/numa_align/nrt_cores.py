"""What the CPU Manager's `full-pcpus-only` option decides with, as NodeResourceTopology attributes.

The kubelet (k8s.io/kubernetes v1.36.3 pkg/kubelet/cm/cpumanager, policy_static.go enforceSMTAlignment) refuses a
container with SMTAlignmentError when its CPUs are not a multiple of the node's CPUs per core
(topology.CPUsPerCore: online CPUs / cores), or when they exceed the node's free CPUs outside the cores holding a
reserved CPU (GetAvailablePhysicalCPUs: the default set less every sibling of a reserved CPU). Neither shows in a
zone's cpu `available`, so numa-align publishes them: `cpusPerCore` on the object, and per zone
`availablePhysicalCpus` (that count in the cell) and `freeCores` (cores none of whose CPUs is held or reserved:
what the cell can give in whole cores; the kubelet takes whole free cores first and threads of partly held cores
after them, takeByTopologyNUMAPacked).

The kubelet manager settings explain needs are named here too, in the kubelet's configuration field names; the
option maps are JSON objects (sorted keys), the form the kubelet's own configuration gives them.
"""

from __future__ import annotations

from collections.abc import Iterable

from numa_align.sysfs import HostTopology

ATTRIBUTE_CPUS_PER_CORE = "cpusPerCore"
ZONE_AVAILABLE_PHYSICAL_CPUS = "availablePhysicalCpus"
ZONE_FREE_CORES = "freeCores"
ATTRIBUTE_CPU_POLICY = "cpuManagerPolicy"
ATTRIBUTE_CPU_OPTIONS = "cpuManagerPolicyOptions"
ATTRIBUTE_MEMORY_POLICY = "memoryManagerPolicy"
ATTRIBUTE_TOPOLOGY_OPTIONS = "topologyManagerPolicyOptions"


def cpus_per_core(topology: HostTopology) -> int:
    """The kubelet's CPUsPerCore: online CPUs over cores (whole division; 0 without CPUs)."""
    cores = {cpu.core for cpu in topology.cpus.values()}
    return len(topology.cpus) // len(cores) if cores else 0


def core_attributes(topology: HostTopology, allocatable: Iterable[int] | None,
                    held: Iterable[int] | None) -> dict[int, list[dict]]:
    """Per NUMA node with CPUs: its `availablePhysicalCpus` and `freeCores` attributes, from the CPUs the kubelet
    may hand out (allocatable; the others are reserved) and those containers hold exclusively. Either unknown
    (None): none, rather than a guess."""
    if allocatable is None or held is None:
        return {}
    free = set(allocatable) - set(held)
    reserved = topology.cpus.keys() - set(allocatable)
    reserved_cores = set().union(*(topology.cpus[cpu].core for cpu in reserved))
    attributes: dict[int, list[dict]] = {}
    for node in topology.cpu_nodes:
        physical = sorted(cpu for cpu in node.cpus & free if cpu not in reserved_cores)
        cores = {topology.cpus[cpu].core for cpu in node.cpus}
        whole = sum(1 for core in cores if core <= free)
        attributes[node.id] = [{"name": ZONE_AVAILABLE_PHYSICAL_CPUS, "value": str(len(physical))},
                               {"name": ZONE_FREE_CORES, "value": str(whole)}]
    return attributes
