"""Stage `preflight`: judge each host that will run pods before anything is changed anywhere.

It gathers only facts (sysfs, cgroup, swap), computes the policy numa-lab would write and prints one block
per host; a host that would be refused fails the run with its reason, naming the host. With
NUMALAB_PREFLIGHT_OUT set (what `numalab preflight INVENTORY` does, on a `--dry` run) it writes each host's
report as JSON there instead of failing, so the command can print them all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError

from numalab.deploy import context, policy
from numalab.model.preflight import HostFacts, HostReport, format_reports, preflight

OUT_VARIABLE = "NUMALAB_PREFLIGHT_OUT"


def host_facts() -> HostFacts:
    """This host's facts; an unreadable sysfs is carried as the reason, not raised."""
    name = context.node_name(host)
    topology, error = None, None
    try:
        topology = policy.node_topology()
    except DeployError as exc:
        error = str(exc).removeprefix(f"{name}: ")
    return HostFacts(
        name=name,
        topology=topology,
        kubelet_version=policy.kubelet_version(),
        settings=context.data(host, "kubelet_settings"),
        cgroup_version=policy.cgroup_version(),
        swap_active=policy.swap_active(),
        allow_newer=policy.allow_newer() or os.environ.get("NUMALAB_ALLOW_NEWER") == "1",
        topology_error=error,
    )


def report() -> HostReport:
    return preflight(host_facts())


@deploy("preflight")
def preflight_stage() -> None:
    """Refuse, before any change, a host whose kubelet would refuse the computed policy."""
    result = report()
    out = os.environ.get(OUT_VARIABLE)
    if out:
        (Path(out) / f"{result.name}.json").write_text(json.dumps(result.to_dict()))  # node name: no '/'
        return
    if not result.ok:
        raise DeployError(f"preflight: {result.refused}; nothing was changed on any host")
    host.noop(format_reports([result]).splitlines()[0])
