"""The cluster test's numa-align fault: its process killed on a worker and kept down while other cases run
(it costs no wait of its own), then `kubectl numa` must call the node's topology stale (its Lease lapsed),
and once it is started again numa-align registers, renews its Lease and the warning goes. Its row goes to
faults.FAULTS."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from kubernetes import client

from tests.cluster.faults import Fault, api, wait
from tests.cluster.guests import ssh
from tests.lab.conftest import BIN


def kill_numa_align(state: Path, node: str) -> float:
    """SIGKILL numa-align's unit on `node` (no clean stop: its sockets stay) and keep it down; when it was."""
    killed = ssh(state, node, "systemctl kill --signal=SIGKILL numa-align && systemctl stop numa-align && "
                              "systemctl is-active numa-align || true")
    assert killed.stdout.strip().splitlines()[-1] in ("inactive", "failed"), killed.stdout + killed.stderr
    return time.monotonic()


def stale(env: dict[str, str], kubeconfig: Path, node: str) -> str | None:
    """What `kubectl numa` says of the node's staleness (None: current)."""
    done = subprocess.run([str(BIN / "kubectl-numa"), "--format", "json", "--node", node],
                          env={**env, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (view,) = json.loads(done.stdout)["nodes"]
    return view.get("stale")


def stale_then_back(state: Path, env: dict[str, str], node: str, killed_at: float) -> Fault:
    """After numa-align's Lease lapsed (120 s), top calls the node stale; started again, it is current again."""
    kubeconfig = state / "kubeconfig"
    wait("numa-align's Lease lapsed (120 s after the kill)", lambda: time.monotonic() - killed_at > 125, 200, 5)
    said = stale(env, kubeconfig, node)
    assert said and "stale since" in said, said  # the fault took effect, and is shown
    started = time.monotonic()
    up = ssh(state, node, "systemctl start numa-align")
    assert up.returncode == 0, up.stderr
    core = client.CoreV1Api(api(state))
    registered = wait(f"numa-align on {node} registered again", lambda: (
        core.read_node(node).status.allocatable or {}).get("numa-align/numa-0") == "100", 120, 2)
    current = wait(f"{node}'s topology current again in kubectl numa", lambda: stale(
        env, kubeconfig, node) is None, 120, 3)
    return Fault("numa-align killed", f"SIGKILL of numa-align's unit on {node}, kept down {started - killed_at:.0f} s",
                 f"kubectl numa: '{said.split(' (')[0]}'; started again: registered, Lease renewed, warning gone",
                 f"registered {registered:.0f} s after its start, current {registered + current:.0f} s after",
                 "nothing (its NRT object kept; devices back)")
