"""The host's NUMA nodes as the plugin sees them, and the JSON `numa-align discover` prints."""

from __future__ import annotations

from numa_align.devices import device_count, resource_name
from numa_align.settings import OPTIONS, Settings, SettingsError
from numa_align.sysfs import NodeInfo, SysfsError, node_dir, read_nodes


def discover(settings: Settings) -> list[NodeInfo]:
    """Online nodes under settings.sysfs_root, checked against the settings.

    Raises SettingsError naming NUMA_SYSFS_ROOT when the tree is unreadable or lists no node, and naming
    NUMA_RESERVED_CPUS when reserved CPUs are on no node.
    """
    variable = OPTIONS["sysfs_root"].variable
    try:
        nodes = read_nodes(settings.sysfs_root)
    except SysfsError as exc:
        raise SettingsError(variable, str(exc)) from None
    if not nodes:
        raise SettingsError(variable, f"{node_dir(settings.sysfs_root)}/online lists no node")
    settings.check_nodes(nodes)
    return nodes


def describe(nodes: list[NodeInfo], settings: Settings) -> dict:
    """Nodes with the resource and device count each would advertise."""
    return {
        "sysfs_root": str(settings.sysfs_root),
        "capacity": settings.capacity,
        "nodes": [
            node.as_dict()
            | {
                "resource": resource_name(node.id),
                "devices": device_count(node.cpus, settings.capacity, settings.reserved_cpus),
            }
            for node in nodes
        ],
    }
