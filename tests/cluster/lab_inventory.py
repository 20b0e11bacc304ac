"""The cluster test's inventories: inventories/kvm.py without its worker-2 and with worker-3 (the real-server
shape), each later run's changes (Memory Manager policy, numa-align's install, worker-1's changed cells)
written as a few lines after it, so every run deploys the default lab's own inventory file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.lab.conftest import REPO
from tests.lab.shapes import CLUSTER_WORKER_NUMA, FOUR_CELL_NUMA

WORKER_3 = {"name": "worker-3", "groups": ["rke2_agents"], "numa": CLUSTER_WORKER_NUMA}
WORKER_3_SETTINGS = {"cpu-manager-policy-options": {"full-pcpus-only": "true"}}
FOUR_CELL_SETTINGS = {"topology-manager-policy": "restricted", "topology-manager-scope": "container",
                      "topology-manager-policy-options": {"prefer-closest-numa-nodes": "true"}}
"""worker-1 once re-cut into FOUR_CELL_NUMA: the policy under which the kubelet may join cells and picks the
closest of equally wide masks, each container aligned on its own (the lab's other workers align whole pods)."""
# inventories/kvm.py's lab without its worker-2 (worker-1's twin): worker-3 is the second worker.
WITHOUT_WORKER_2 = textwrap.dedent("""
    _lab = lab_from_dict({"settings": _settings, "guests": [g for g in _GUESTS if g["name"] != "worker-2"]
                                                           + extra_guests(os.environ)})
    _groups = pyinfra_groups(_lab)
    lab_guests, registry = _groups["lab_guests"], _groups["registry"]
    rke2_servers, rke2_agents = _groups["rke2_servers"], _groups["rke2_agents"]
    """)


def write_inventory(path: Path, memory_policy: str | None = None, numa_align_install: str | None = None,
                    worker_1_offline: str | None = None, worker_1_cell_1: str | None = None,
                    four_cells: bool = False) -> Path:
    """inventories/kvm.py with worker-3's CPU Manager options, and maybe the workers' Memory Manager policy,
    numa-align's install (systemd by default, or daemonset: the lab registry's image), CPUs of worker-1's
    cell 1 declared offline and its memory changed, or worker-1 re-cut into four cells (FOUR_CELL_NUMA) under
    restricted + prefer-closest-numa-nodes."""
    override = textwrap.dedent(f"""
        for _name, _data in rke2_agents:
            _data["kubelet_settings"] = {WORKER_3_SETTINGS!r} if _data["kvm_guest"] == "worker-3" else {{}}
        """)
    if four_cells:
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                if _data["kvm_guest"] == "worker-1":
                    _data["numa"], _data["kubelet_settings"] = {FOUR_CELL_NUMA!r}, {FOUR_CELL_SETTINGS!r}
            """)
    if memory_policy is not None:
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                _data["kubelet_settings"]["memory-manager-policy"] = {memory_policy!r}
            """)
    if numa_align_install is not None:
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                _data["numa_align_install"] = {numa_align_install!r}
            """)
    cell_1 = {**({"memory": worker_1_cell_1} if worker_1_cell_1 is not None else {}),
              **({"offline_cpus": worker_1_offline} if worker_1_offline is not None else {})}
    if cell_1:  # worker-1's cell 1 as changed under the lab (CPUs offline, memory in the domain): declared so
        override += textwrap.dedent(f"""
            for _name, _data in rke2_agents:
                if _data["kvm_guest"] == "worker-1":
                    _data["numa"] = {{**_data["numa"], "cells": [
                        {{**c, **{cell_1!r}}} if c["id"] == 1 else c
                        for c in _data["numa"]["cells"]]}}
            """)
    path.write_text(f"exec(open({str(REPO / 'inventories' / 'kvm.py')!r}).read())\n{WITHOUT_WORKER_2}{override}")
    return path
