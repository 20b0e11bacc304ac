"""rke2_install then rke2_service on a @fake agent whose rke2-agent is running: a new `rke2_version` is
installed and the service restarted for it; the installed version again restarts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalab.deploy import api
from numalab.deploy.rke2 import rke2_install, rke2_service
from numalab.deploy.rke2.config import Rke2Files
from numalab.model.rke2_install import INSTALLED_MARKER
from tests.fakehost import execute, fake_host

OLD, NEW = "v1.31.4+rke2r1", "v1.31.5+rke2r1"
RESTART = "systemctl restart rke2-agent"


@pytest.fixture(autouse=True)
def no_cluster_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """No API server: the node reads as absent, and the wait for Ready returns at once."""
    monkeypatch.setattr(api, "read_node", lambda kubeconfig, node: None)
    monkeypatch.setattr(api, "wait_node_ready", lambda **kwargs: None)


def agent_commands(tmp_path: Path, version: str, written: Rke2Files | None = None) -> list[str]:
    """The commands the two stages run on an agent that has OLD installed and rke2-agent running."""
    responses = {
        INSTALLED_MARKER: f"{OLD} {'0' * 64}",
        "systemctl show": ["Id=rke2-agent.service", "SubState=running", "UnitFileState=enabled"],
    }
    with fake_host(rke2_install="online", rke2_version=version, k8s_state_dir=str(tmp_path),
                   fake_responses=responses) as host:
        installed = rke2_install()
        rke2_service(written or Rke2Files("rke2-agent", changed=[], stale=[]), installed)
        return execute(host)


def test_a_new_rke2_version_restarts_the_service(tmp_path: Path) -> None:
    commands = agent_commands(tmp_path, NEW)
    installs = [i for i, c in enumerate(commands) if "tar xzf" in c]
    restarts = [i for i, c in enumerate(commands) if RESTART in c]
    assert len(installs) == 1 and len(restarts) == 1
    assert installs[0] < restarts[0]


def test_the_installed_version_restarts_nothing(tmp_path: Path) -> None:
    commands = agent_commands(tmp_path, OLD)
    assert not any("tar xzf" in c or RESTART in c for c in commands)
