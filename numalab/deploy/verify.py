"""Stage `verify` (every host that runs pods): the node reports allocatable `numa-align/numa-N` for each
of its NUMA nodes, and its kubelet's /configz shows the manager policies the deploy computed.

Asked from the controller through the API server (admin kubeconfig). A line per node is printed; a
node that does not get there in time fails the run with what it shows instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import python

from numalab.deploy import api, context
from numalab.deploy.policy import expected_policies, host_sysfs, node_policy
from numalab.placement.api_objects import kubelet_policies, numa_align_allocatable
from numalab.progress import say

TIMEOUT = 180.0
POLICY_FIELDS = ("cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerScope")


def observe(kubeconfig: Path, name: str) -> dict[str, Any]:
    """What the cluster shows of node `name`: its numa-align allocatable and its kubelet's policies."""
    core = api.core_api(kubeconfig)
    node = core.read_node(name, _request_timeout=10)
    response = core.connect_get_node_proxy_with_path(name, "configz", _preload_content=False, _request_timeout=30)
    return {
        "allocatable": numa_align_allocatable(node.status.allocatable or {}),
        "policies": kubelet_policies(json.loads(response.data)),
    }


def problems(seen: dict[str, Any], numa_nodes: list[int], expected: dict[str, str]) -> list[str]:
    found = []
    missing = [n for n in numa_nodes if seen["allocatable"].get(n, 0) <= 0]
    if missing:
        found.append("no allocatable " + ", ".join(f"numa-align/numa-{n}" for n in missing))
    for field in POLICY_FIELDS:
        if seen["policies"].get(field) != expected[field]:
            found.append(f"configz {field} is {seen['policies'].get(field)!r}, not {expected[field]!r}")
    return found


def row(name: str, seen: dict[str, Any]) -> str:
    resources = " ".join(f"numa-align/numa-{n}={count}" for n, count in sorted(seen["allocatable"].items()))
    policies = seen["policies"]
    return (f"verify {name}: {resources} | cpu {policies['cpuManagerPolicy']}, memory "
            f"{policies['memoryManagerPolicy']}, topology {policies['topologyManagerPolicy']}/"
            f"{policies['topologyManagerScope']}")


def check(kubeconfig: Path, node: str, numa_nodes: list[int], expected: dict[str, str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: list[str] = ["the API did not answer"]
    while True:
        try:
            seen = observe(kubeconfig, node)
            last = problems(seen, numa_nodes, expected)
            if not last:
                say(row(node, seen))
                return
        except api.Problem as exc:
            last = [f"API: {str(exc).splitlines()[0]}"]
        if time.monotonic() >= deadline:
            raise RuntimeError(f"verify {node}: after {timeout:.0f} s: {'; '.join(last)} "
                               f"(see `journalctl -u kubelet -u numa-align` on {node})")
        time.sleep(3)


@deploy("verify")
def verify() -> None:
    """Check allocatable numa-align/numa-N and the kubelet's policies; print one line per node."""
    name = context.node_name(host)
    kubeconfig = context.state_dir(host) / "kubeconfig"
    numa_nodes = [node.id for node in host_sysfs().cpu_nodes]
    expected = expected_policies(node_policy())
    try:
        seen = observe(kubeconfig, name)
        if not problems(seen, numa_nodes, expected):
            say(row(name, seen))
            host.noop(f"{name} shows numa-align/numa-N for each NUMA node and the computed policies")
            return
    except api.Problem:
        pass
    python.call(name=f"Verify {name}: numa-align/numa-N allocatable, kubelet policies", function=check,
                kubeconfig=kubeconfig, node=name, numa_nodes=numa_nodes, expected=expected, timeout=TIMEOUT)
