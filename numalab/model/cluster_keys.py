"""Host data keys whose effect is cluster-wide, checked for agreement before anything changes.

pyinfra reads host data per host, but some keys pick one thing for the whole cluster: one DaemonSet or
one unit per node, one set of binaries, one state dir with the cluster's keys. Hosts that disagree would
have the run do one thing for one host and its opposite for the next (a DaemonSet applied by the first
node and every other node's unit left running beside it). So the inventory is refused, naming each host
and its value, with the defaults filled in: a host that leaves a key unset has the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from numalab.model.errors import ValidationError

CLUSTER_KEYS: dict[str, Any] = {
    "k8s_distribution": "auto",
    "k8s_binaries": None,  # go:vX.Y.Z (default: the pinned release), a directory or a server tarball
    "k8s_state_dir": None,  # controller-side: pki, kubeconfig, wheels (lab: the lab's state dir)
    "rke2_registry_airgap": False,  # rke2: system-default-registry is the lab registry
}
"""Keys every cluster host (server, nodes, registry) must agree on, with their defaults."""

NODE_KEYS: dict[str, Any] = {
    "numa_align_install": "systemd",
    "numa_align_image": None,  # for numa_align_install: daemonset
    "numa_align_nrt": None,  # numa-align publishes NodeResourceTopology (None: where it has credentials)
}
"""Keys the hosts that run pods must agree on (the numa-align install is one DaemonSet or a unit on each)."""


def check_agreement(hosts: Iterable[tuple[str, Mapping[str, Any], bool]]) -> None:
    """`hosts`: (node name, host data, runs pods). Raise ValidationError naming the first key that differs."""
    listed = list(hosts)
    for keys, who in ((CLUSTER_KEYS, listed), (NODE_KEYS, [h for h in listed if h[2]])):
        for key, default in keys.items():
            values = {name: _value(data, key, default) for name, data, _ in who}
            if len({repr(value) for value in values.values()}) > 1:
                shown = ", ".join(f"{name}={value!r}" for name, value in sorted(values.items()))
                scope = "every host that runs pods" if keys is NODE_KEYS else "every host of the cluster"
                raise ValidationError(key, f"differs between hosts ({shown}); it acts on the whole cluster, so set "
                                           f"it the same on {scope} (an unset key is its default, {default!r})")


def _value(data: Mapping[str, Any], key: str, default: Any) -> Any:
    value = data.get(key)
    return default if value is None else value
