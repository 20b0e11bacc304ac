"""Per-node settings for a DaemonSet: one file for every node, each pod taking its own node's entry.

A DaemonSet has one pod template, but the settings that mirror a node's kubelet (its reserved CPUs, its
Topology Manager policy and scope) differ between the servers of a mixed fleet. numa-lab writes them all
into one ConfigMap key, a JSON object `{node name: {NUMA_* variable: value}}`, mounts it, and names the file
in NUMA_ALIGN_NODE_SETTINGS; the pod's node name (NUMA_ALIGN_NODE_NAME, else NODE_NAME from spec.nodeName)
picks the entry, which is laid over the environment before the settings are read. JSON, not YAML: numa-lab
writes the file itself, and the standard library reads it.

A node without an entry is refused (the pod exits 2 naming the file and the node): running with another
node's settings, or with none, would publish a kubelet policy that is not this node's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from numa_align.settings import SettingsError

VARIABLE = "NUMA_ALIGN_NODE_SETTINGS"
"""Names the JSON file of every node's settings; unset or empty: the environment alone."""
NODE_VARIABLES = ("NUMA_ALIGN_NODE_NAME", "NODE_NAME")
"""Where the pod's node name is read, in this order."""


def node_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this node's entry of the NUMA_ALIGN_NODE_SETTINGS file laid over it (or `env` as it is)."""
    path = (env.get(VARIABLE) or "").strip()
    if not path:
        return dict(env)
    node = next((env[name].strip() for name in NODE_VARIABLES if (env.get(name) or "").strip()), "")
    if not node:
        raise SettingsError(VARIABLE, f"{path} holds settings per node, but neither {' nor '.join(NODE_VARIABLES)} "
                                      "names this node (the DaemonSet sets NODE_NAME from spec.nodeName)")
    every = _read(Path(path))
    if node not in every:
        known = ", ".join(sorted(every)) or "none"
        raise SettingsError(VARIABLE, f"{path} has no settings for node {node} (it has: {known}); run numa-lab's "
                                      "deploy, which writes an entry for every node it labels for numa-align")
    entry = every[node]
    if not isinstance(entry, dict) or not all(
            isinstance(key, str) and key.startswith("NUMA_") and isinstance(value, str)
            for key, value in entry.items()):
        raise SettingsError(VARIABLE, f"{path}: the entry of node {node} is not a mapping of NUMA_* variables "
                                      "to strings")
    return {**env, **entry}


def _read(path: Path) -> dict:
    try:
        loaded = json.loads(path.read_text())
    except OSError as exc:
        raise SettingsError(VARIABLE, f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SettingsError(VARIABLE, f"{path} is not JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise SettingsError(VARIABLE, f"{path} is not a JSON object of node name -> settings")
    return loaded
