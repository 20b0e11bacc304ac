"""The shape of the lab the cluster stages were run on: a registry, a control plane and two agents."""

from __future__ import annotations

from typing import Any

import pytest

from numalab.model.cluster import Cluster, cluster_from_groups

Groups = dict[str, list[tuple[str, str, dict[str, Any]]]]


@pytest.fixture
def groups() -> Groups:
    """Inventory groups as the deploy reads them: (node name, address, host data); agents out of name order."""
    return {
        "registry": [("registry", "10.77.0.5", {})],
        "rke2_servers": [("server", "10.77.0.10", {})],
        "rke2_agents": [("worker-b", "10.77.0.12", {}), ("worker-a", "10.77.0.11", {})],
    }


@pytest.fixture
def cluster(groups: Groups) -> Cluster:
    return cluster_from_groups("t", groups)
