"""How the e2e suite starts: collectable without a cluster, and a hard stop naming the kubeconfig
when no cluster answers (never a green run with everything skipped)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.e2e_logic.conftest import E2E_DIR


def run_e2e(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NUMALAB_SSH_CONFIG")}
    return subprocess.run([sys.executable, "-m", "pytest", str(E2E_DIR), *args], capture_output=True, text=True,
                          env={**base, **(env or {})}, cwd=E2E_DIR.parent, timeout=120)


def test_collect_only_needs_no_cluster(tmp_path):
    done = run_e2e("--collect-only", "-q", "--kubeconfig", str(tmp_path / "absent"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "13 tests collected" in done.stdout
    assert f"rootdir: {E2E_DIR}" in run_e2e("--collect-only").stdout


def test_missing_kubeconfig_stops_the_run_naming_it(tmp_path):
    kubeconfig = tmp_path / "lab-kubeconfig"
    done = run_e2e(env={"KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 4
    assert f"e2e: no cluster reachable: kubeconfig {kubeconfig} does not exist" in done.stdout
    assert "passed" not in done.stdout and "skipped" not in done.stdout


def test_silent_api_server_stops_the_run_naming_the_kubeconfig(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        f"clusters: [{{name: lab, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: admin, user: {token: t}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: admin}}]\n"
    )
    done = run_e2e("--kubeconfig", str(kubeconfig))
    assert done.returncode == 4
    assert f"no API server answers at https://127.0.0.1:{port} (kubeconfig {kubeconfig})" in done.stdout
