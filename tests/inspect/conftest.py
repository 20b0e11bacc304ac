"""A fake node for the inspector: sysfs tree, kubelet checkpoints, pod log dirs, PodResources double."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakesysfs import write_node_tree
from tests.kubeletdouble.podresources import (
    ContainerAlloc,
    Devices,
    Memory,
    PodAlloc,
    PodResourcesDouble,
    serve_pod_resources,
)

PINNED_UID = "6f1c2a9e-1111-4c3b-9d7a-000000000001"
SHARED_UID = "6f1c2a9e-2222-4c3b-9d7a-000000000002"
MIB64 = 64 * 2**20


@dataclass
class FakeNode:
    root: Path
    socket: Path
    double: PodResourcesDouble

    @property
    def args(self) -> list[str]:
        return ["--socket", str(self.socket), "--state-dir", str(self.root / "kubelet"),
                "--pod-log-dir", str(self.root / "pods"), "--sysfs-root", str(self.root / "sys")]

    def write_state(self, cpu_entries: dict, memory_entries: dict, shared: str = "0,3",
                    memory_policy: str | None = "Static") -> None:
        """Write the CPU and Memory Manager checkpoints; memory_policy None writes none (kubelet < 1.21)."""
        state = self.root / "kubelet"
        state.mkdir(exist_ok=True)
        (state / "cpu_manager_state").write_text(json.dumps(
            {"policyName": "static", "defaultCpuSet": shared, "entries": cpu_entries, "checksum": 1}))
        memory = state / "memory_manager_state"
        if memory_policy is None:
            memory.unlink(missing_ok=True)
            return
        memory.write_text(json.dumps(
            {"policyName": memory_policy, "machineState": {}, "entries": memory_entries, "checksum": 2}))


@pytest.fixture
def node(tmp_path):
    """Two NUMA nodes (cpus 0-1, 2-3); a pod pinned to node 1 and a Burstable pod in the shared pool."""
    write_node_tree(tmp_path / "sys", {0: "0-1", 1: "2-3"})
    for ns, name, uid in (("e2e", "pinned-1", PINNED_UID), ("e2e", "burstable", SHARED_UID)):
        (tmp_path / "pods" / f"{ns}_{name}_{uid}" / "app").mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="pr-") as sockdir:
        socket = Path(sockdir) / "kubelet.sock"
        with serve_pod_resources(socket) as double:
            fake = FakeNode(tmp_path, socket, double)
            fake.write_state(
                {PINNED_UID: {"app": "2"}},
                {PINNED_UID: {"app": [{"numaAffinity": [1], "type": "memory", "size": MIB64}]}},
            )
            double.set_allocatable(
                cpus=[1, 2, 3],
                devices=[Devices("numa-align/numa-0", ["numa-0-0", "numa-0-1"], [0]),
                         Devices("numa-align/numa-1", ["numa-1-0", "numa-1-1"], [1])],
                memory=[Memory("memory", 2**30, [0]), Memory("memory", 2**30, [1])],
            )
            double.set_pods([
                PodAlloc("e2e", "pinned-1", [ContainerAlloc(
                    "app", cpus=[2], devices=[Devices("numa-align/numa-1", ["numa-1-0"], [1])],
                    memory=[Memory("memory", MIB64, [1])])]),
                PodAlloc("e2e", "burstable", [ContainerAlloc("app")]),
            ])
            yield fake
