"""The host's NUMA nodes as the plugin sees them, and the JSON `numa-align discover` prints."""

from __future__ import annotations

from numa_align.devices import device_count, resource_name
from numa_align.settings import OPTIONS, Settings, SettingsError
from numa_align.sysfs import HostTopology, NodeInfo, SysfsError, node_dir, read_sysfs


def discover(settings: Settings) -> HostTopology:
    """The host under settings.sysfs_root, checked against the settings.

    Raises SettingsError naming NUMA_SYSFS_ROOT when the tree is unreadable or has no node with an online
    CPU, and naming NUMA_RESERVED_CPUS when reserved CPUs are not online CPUs of a node.
    """
    variable = OPTIONS["sysfs_root"].variable
    try:
        host = read_sysfs(settings.sysfs_root)
    except SysfsError as exc:
        raise SettingsError(variable, str(exc)) from None
    if not host.cpu_nodes:
        listed = ", ".join(str(node.id) for node in host.nodes) or "none"
        raise SettingsError(variable, f"{node_dir(settings.sysfs_root)}/online lists no node with an online CPU "
                                      f"(online nodes: {listed})")
    settings.check_nodes(host.cpu_nodes)
    return host


def advertised(node: NodeInfo) -> bool:
    """numa-align/numa-N exists only for a node with an online CPU: a memory-only node's device could never
    be had together with CPUs, so every pod asking for it would fail admission (TopologyAffinityError)."""
    return bool(node.cpus)


def describe(host: HostTopology, settings: Settings) -> dict:
    """Every online node; those with CPUs with the resource and device count each would advertise,
    memory-only ones marked so, with no resource."""
    nodes = []
    for node in host.nodes:
        entry = node.as_dict()
        if advertised(node):
            entry |= {"resource": resource_name(node.id),
                      "devices": device_count(node.cpus, settings.capacity, settings.reserved_cpus)}
        else:
            entry |= {"resource": None, "devices": 0}
        nodes.append(entry)
    return {
        "sysfs_root": str(settings.sysfs_root),
        "capacity": settings.capacity,
        "threads_per_core": host.threads_per_core,
        "offline_nodes": sorted(host.offline_nodes),
        "nodes": nodes,
    }
