"""RKE2's own stages on real guests, driven through inventories/baremetal.example.py as a bare-metal
user would (SSH hosts, `--data` overrides), with an artifact set FABRICATED by tests/rke2/fabricated.py.

RKE2 cannot be downloaded on the project's machines, so its binary and images are stand-ins with the
release's names and layout. What runs for real: the controller-side and node-side checks against the sums
file, the upload, the install (INSTALL_RKE2_ARTIFACT_PATH semantics), the config files computed from each
guest's sysfs, the token handling, the policy-change reset of the checkpoint files, idempotence, and the
`--dry` plan of deploys/cluster.py. rke2-server / rke2-agent are never started, and nothing here says they
would start.

The tests run in file order on the session's guests: `two` plays the server, `three` the agent.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from numa_align.sysfs import DUMP_COMMAND, SysfsDump, read_host

from numalab.deploy.rke2.config import kubelet_args_text
from numalab.deploy.rke2.install import verify_command
from numalab.files import file_digest
from numalab.model.components import KUBELET_GUARD
from numalab.model.kubelet import KubeletSettings, kubelet_policy
from numalab.model.kubelet_state import MEMORY_MANAGER_STATE
from numalab.sysfs import topology_from_host
from tests.lab.conftest import BIN, LabGuest, RunningLab
from tests.rke2.fabricated import FABRICATED_NOTE, make_artifact_set, tamper

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventories" / "baremetal.example.py"
FILES_DEPLOY = Path(__file__).with_name("rke2_files_deploy.py")
VERSION = "v1.31.4+rke2r1"
# kubelet_settings of inventories/baremetal.example.py
EXAMPLE_SETTINGS = {
    "cpu-manager-policy": "static",
    "memory-manager-policy": "Static",
    "topology-manager-policy": "single-numa-node",
    "topology-manager-scope": "pod",
}


@dataclass
class Rke2Lab:
    lab: RunningLab
    artifacts: Path
    state: Path

    def run(self, deploy: Path, *extra: str, artifacts: Path | None = None,
            online: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """The example inventory over SSH; airgap from `artifacts`, or `online` data instead."""
        settings = self.lab.lab.settings
        data = {
            "ssh_config_file": settings.state_dir / "ssh_config",
            "ssh_known_hosts_file": settings.state_dir / "known_hosts",
            "ssh_strict_host_key_checking": "yes",
            "rke2_version": VERSION,
            "rke2_artifacts_dir": artifacts or self.artifacts,
            "k8s_state_dir": self.state,
            "k8s_server_runs_pods": "true",
        }
        if online is not None:  # the example's rke2_artifacts_dir emptied: it is refused with online
            data.update(rke2_install="online", rke2_artifacts_dir="", **online)
        # --dry prints its plan (the "Detected changes" table) only without -y
        argv = [str(BIN / "pyinfra")] + ([] if "--dry" in extra else ["-y"])
        for key, value in data.items():
            argv += ["--data", f"{key}={value}"]
        guests = self.lab.guests
        env = {**os.environ, "RKE2_SERVERS": f"two={guests['two'].address}",
               "RKE2_AGENTS": f"three={guests['three'].address}", "RKE2_REGISTRY": ""}
        return subprocess.run([*argv, *extra, str(EXAMPLE), str(deploy)], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def rke2_lab(kvm_lab: RunningLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rke2Lab]:
    work = tmp_path_factory.mktemp("rke2")
    yield Rke2Lab(kvm_lab, make_artifact_set(work / "artifacts", VERSION), work / "state")


def grand_total(result: subprocess.CompletedProcess[str]) -> list[str]:
    for line in (result.stdout + result.stderr).splitlines():
        if line.strip().startswith("Grand total"):
            return line.strip()[len("Grand total"):].split()
    raise AssertionError(result.stdout + result.stderr)


def untouched(guest: LabGuest) -> None:
    for path in ("/usr/local/bin/rke2", "/etc/rancher", "/var/lib/numa-lab", "/var/lib/rancher"):
        assert not guest.host.file(path).exists, f"{guest.name}: {path} exists"


def test_dry_run_of_the_cluster_deploy_prints_the_plan_and_changes_nothing(rke2_lab: Rke2Lab) -> None:
    result = rke2_lab.run(REPO / "deploys" / "cluster.py", "--dry", "--diff")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Kubernetes distribution: rke2" in output
    # the join token was made on the controller (0600) and appears in no plan or diff
    token = (rke2_lab.state / "rke2-token").read_text().strip()
    assert stat.S_IMODE((rke2_lab.state / "rke2-token").stat().st_mode) == 0o600 and token not in output
    for step in ("Upload rke2.linux-amd64.tar.gz", "Check the staged files", "Install RKE2", "rke2-server enabled",
                 "rke2-agent enabled", "Kubelet policy drop-in"):
        assert step in output, step
    for guest in rke2_lab.lab.guests.values():
        untouched(guest)


def test_a_mismatched_artifact_is_refused_before_any_upload(rke2_lab: Rke2Lab, tmp_path: Path) -> None:
    bad = make_artifact_set(tmp_path / "bad", VERSION)
    tamper(bad / "rke2-images.linux-amd64.tar.zst")
    result = rke2_lab.run(FILES_DEPLOY, artifacts=bad)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "rke2-images.linux-amd64.tar.zst does not match sha256sum-amd64.txt" in output
    for guest in rke2_lab.lab.guests.values():
        untouched(guest)


def test_a_copy_damaged_on_the_node_is_refused_there_and_removed(rke2_lab: Rke2Lab) -> None:
    """The node's own check: a staged images archive that differs from the sums file (as a transfer could
    leave it) stops the install, names the file and leaves nothing behind."""
    guest = rke2_lab.lab.guests["three"]
    stage = "/var/lib/numa-lab/rke2-artifacts"
    for name in ("sha256sum-amd64.txt", "rke2.linux-amd64.tar.gz", "rke2-images.linux-amd64.tar.zst"):
        data = (rke2_lab.artifacts / name).read_bytes()
        put = subprocess.run(["ssh", "-F", str(guest.ssh_config), guest.name,
                              f"mkdir -p {stage} && cat > {stage}/{name}"], input=data, capture_output=True)
        assert put.returncode == 0, put.stderr
    guest.host.run(f"echo damaged >> {stage}/rke2-images.linux-amd64.tar.zst")
    check = guest.host.run(verify_command(["rke2.linux-amd64.tar.gz", "rke2-images.linux-amd64.tar.zst"]))
    assert check.rc != 0
    assert "rke2-images.linux-amd64.tar.zst does not match sha256sum-amd64.txt" in check.stderr
    assert not guest.host.file(stage).exists
    guest.host.run("rmdir /var/lib/numa-lab")
    untouched(guest)


def test_airgap_install_and_config_files(rke2_lab: Rke2Lab) -> None:
    result = rke2_lab.run(FILES_DEPLOY)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    token = (rke2_lab.state / "rke2-token").read_text().strip()
    assert stat.S_IMODE((rke2_lab.state / "rke2-token").stat().st_mode) == 0o600 and len(token) == 64
    assert token not in output
    server = rke2_lab.lab.guests["two"]
    for guest in rke2_lab.lab.guests.values():
        host = guest.host
        version = host.run("/usr/local/bin/rke2 --version").stdout
        assert VERSION in version and FABRICATED_NOTE in version  # the fabricated binary, extracted
        for role in ("server", "agent"):
            assert host.file(f"/usr/local/lib/systemd/system/rke2-{role}.service").contains(FABRICATED_NOTE)
            # systemd knows the units, and neither was started or enabled
            assert host.run(f"systemctl show -p LoadState --value rke2-{role}").stdout.strip() == "loaded"
            assert host.run(f"systemctl is-active rke2-{role}").stdout.strip() == "inactive"
            assert host.run(f"systemctl is-enabled rke2-{role}").stdout.strip() == "disabled"
        images = host.file("/var/lib/rancher/rke2/agent/images/rke2-images.linux-amd64.tar.zst")
        assert images.sha256sum == file_digest(rke2_lab.artifacts / "rke2-images.linux-amd64.tar.zst")
        assert not host.file("/var/lib/numa-lab/rke2-artifacts").exists  # staging removed after the install
        config_file = host.file("/etc/rancher/rke2/config.yaml")
        assert config_file.mode == 0o600
        config = yaml.safe_load(config_file.content_string)
        assert config["token"] == token and config["node-name"] == guest.name
        assert config["node-ip"] == guest.address
        if guest is server:
            assert "server" not in config and server.address in config["tls-san"]
            assert config["write-kubeconfig-mode"] == "0600"
        else:
            assert config["server"] == f"https://{server.address}:9345"
        # The drop-in is exactly what the policy computes from this guest's own sysfs, for RKE2's kubelet.
        dropin = host.file("/etc/rancher/rke2/config.yaml.d/50-numa-lab.yaml").content_string
        assert dropin == kubelet_args_text(_policy_from_sysfs(guest))
        args = yaml.safe_load(dropin)["kubelet-arg+"]
        assert "memory-manager-policy=Static" in args and "topology-manager-policy=single-numa-node" in args
        assert not host.file("/etc/rancher/rke2/registries.yaml").exists  # no registry in this inventory
        # The kubelet boot guard runs before RKE2's service, as before upstream's kubelet unit; systemd loaded it.
        service = "rke2-server" if guest is server else "rke2-agent"
        guard = host.file(f"/etc/systemd/system/{service}.service.d/10-numa-lab-kubelet-guard.conf").content_string
        assert guard.startswith("[Service]\nExecStartPre=-/usr/bin/python3 -S -E ") and host.file(KUBELET_GUARD).exists
        loaded = host.run(f"systemctl show {service} -p DropInPaths --value").stdout
        assert "10-numa-lab-kubelet-guard.conf" in loaded, loaded


def test_second_run_changes_nothing(rke2_lab: Rke2Lab) -> None:
    result = rke2_lab.run(FILES_DEPLOY)
    assert result.returncode == 0, result.stdout + result.stderr
    hosts = grand_total(result)[0]
    assert grand_total(result) == [hosts, "-", "-", hosts]


@contextmanager
def api_without_nodes(kubeconfig: Path) -> Iterator[None]:
    """An API server on loopback (the drain runs on the controller) that has no Node yet: what a cluster
    answers for nodes that never joined, so a reset has nothing to drain. RKE2 itself cannot run here."""
    class NoNodes(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            known = self.path.split("?")[0] == "/api/v1/nodes"
            body = json.dumps({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": []} if known else
                              {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}).encode()
            self.send_response(200 if known else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoNodes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    try:
        yield
    finally:
        server.shutdown()
        kubeconfig.unlink()


def test_a_memory_policy_change_resets_the_checkpoint_once(rke2_lab: Rke2Lab) -> None:
    """The kubelet refuses memory_manager_state written under another policy. Without an API to drain the node
    through, the reset is refused and nothing is touched; with one that has no such Node (never joined:
    nothing to drain), the stage removes the file (with rke2-agent / rke2-server stopped), and the run after
    that touches nothing."""
    agent = rke2_lab.lab.guests["three"]
    agent.host.run(f"mkdir -p /var/lib/kubelet && echo '{{\"policyName\":\"Static\"}}' > {MEMORY_MANAGER_STATE}")
    none = json.dumps({"memory-manager-policy": "None"})
    refused = rke2_lab.run(FILES_DEPLOY, "--data", f"kubelet_settings={none}")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "nothing was changed on three" in output, output
    assert "Stop rke2-agent" not in output and agent.host.file(MEMORY_MANAGER_STATE).exists
    with api_without_nodes(rke2_lab.state / "kubeconfig"):
        changed = rke2_lab.run(FILES_DEPLOY, "--data", f"kubelet_settings={none}")
        output = changed.stdout + changed.stderr
        assert changed.returncode == 0, output
        assert f"Remove {MEMORY_MANAGER_STATE}" in output and "Stop rke2-agent" in output
        assert not agent.host.file(MEMORY_MANAGER_STATE).exists
        args = yaml.safe_load(agent.host.file("/etc/rancher/rke2/config.yaml.d/50-numa-lab.yaml").content_string)
        assert "memory-manager-policy=None" in args["kubelet-arg+"]
        agent.host.run(f"echo '{{\"policyName\":\"None\"}}' > {MEMORY_MANAGER_STATE}")
        again = rke2_lab.run(FILES_DEPLOY, "--data", f"kubelet_settings={none}")
        assert again.returncode == 0, again.stdout + again.stderr
        assert grand_total(again)[1:3] == ["-", "-"]
        assert agent.host.file(MEMORY_MANAGER_STATE).exists
        back = rke2_lab.run(FILES_DEPLOY)  # the example's policy again, for the tests after this one
        assert back.returncode == 0, back.stdout + back.stderr


@contextmanager
def release_server(address: str, root: Path) -> Iterator[str]:
    """A fabricated release site on the lab's own network (the host's bridge address), as GitHub lays
    releases out: <url>/<version>/<file>."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer((address, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_online_install_checks_the_download_on_the_node(rke2_lab: Rke2Lab, tmp_path: Path) -> None:
    """online: the node downloads the release; a tarball that does not match the sums file is refused
    there (staging removed, the installed release untouched); the matching one is installed."""
    newer = "v1.31.5+rke2r1"
    root = tmp_path / "releases"
    make_artifact_set(root / newer, newer)
    tamper(root / newer / "rke2.linux-amd64.tar.gz")
    gateway = str(rke2_lab.lab.lab.settings.gateway)
    agent = rke2_lab.lab.guests["three"]
    with release_server(gateway, root) as url:
        online = {"rke2_version": newer, "rke2_release_url": url}
        refused = rke2_lab.run(FILES_DEPLOY, online=online)
        assert refused.returncode != 0
        assert "rke2.linux-amd64.tar.gz does not match sha256sum-amd64.txt" in refused.stdout + refused.stderr
        assert not agent.host.file("/var/lib/numa-lab/rke2-artifacts").exists
        assert VERSION in agent.host.run("/usr/local/bin/rke2 --version").stdout

        make_artifact_set(root / newer, newer)  # a good release at the same place
        installed = rke2_lab.run(FILES_DEPLOY, online=online)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        for guest in rke2_lab.lab.guests.values():
            assert newer in guest.host.run("/usr/local/bin/rke2 --version").stdout
            assert guest.host.file("/var/lib/numa-lab/rke2-installed.sha256").content_string.startswith(newer)
        again = rke2_lab.run(FILES_DEPLOY, online=online)
        assert again.returncode == 0 and grand_total(again)[1:3] == ["-", "-"], again.stdout + again.stderr


def _policy_from_sysfs(guest: LabGuest):  # noqa: ANN202 - a KubeletPolicy
    dump = guest.host.run(DUMP_COMMAND).stdout.splitlines()
    topology = topology_from_host(read_host(SysfsDump(dump)), where=guest.name)
    settings = {**EXAMPLE_SETTINGS, "kubelet-version": VERSION.partition("+")[0]}
    return kubelet_policy(topology, KubeletSettings.from_dict(settings))
