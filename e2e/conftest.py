"""Fixtures and options of the e2e suite, which runs against a live cluster only.

The workers' ssh_config comes from testinfra's own --ssh-config option (else $NUMALAB_SSH_CONFIG) and
serves both testinfra and the inspector.

`pytest e2e --collect-only` needs no cluster. Any other run checks the kubeconfig and the API server
first and stops at once, naming the kubeconfig, when they do not answer: a run never passes by
skipping everything. Pods live in one namespace per run, deleted at the end whatever happened.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
from api_outages import record as outages
from inspect_retry import ASK_AGAIN_AFTER, JOURNAL_COMMAND, inspect_twice
from kube import Cluster, ClusterUnreachable, connect
from kubernetes.client.rest import ApiException
from numa_align.cpulist import parse_cpulist
from results import ALL_NODES, Results

from numalab.inspect import DEFAULT_REMOTE_COMMAND, remote_inspect

DEFAULT_PROBE_IMAGE = "registry:5000/numa-lab/probe:1"
_CLUSTER_KEY = pytest.StashKey["Cluster"]()
_RESULTS_KEY = pytest.StashKey[Results]()


@dataclass(frozen=True)
class Settings:
    """What the run targets. Times in seconds."""

    kubeconfig: Path
    ssh_config: Path
    probe_image: str
    capacity_mode: str
    pod_timeout: float
    expect_topology_policy: str
    expect_memory_policy: str
    plugin_service: str
    agent_service: str
    inspect_command: str
    restart_worker: str | None
    ssh_host_format: str
    prometheus_url: str = ""  # "": the prometheus case is n/a
    explain_pairs: str = "all"  # case 8: every pair, or "closest": only the closest- pairs

    def ssh_host(self, worker: str) -> str:
        return self.ssh_host_format.format(node=worker)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("numa-lab e2e")
    group.addoption("--kubeconfig", default=os.environ.get("KUBECONFIG") or str(Path.home() / ".kube/config"),
                    help="kubeconfig of the cluster under test (default $KUBECONFIG, else ~/.kube/config)")
    group.addoption("--probe-image", default=os.environ.get("NUMALAB_PROBE_IMAGE", DEFAULT_PROBE_IMAGE),
                    help=f"busybox-like image for the probe (default $NUMALAB_PROBE_IMAGE, else {DEFAULT_PROBE_IMAGE})")
    group.addoption("--capacity-mode", choices=("slots", "cpus"),
                    default="cpus" if os.environ.get("NUMA_CAPACITY", "").strip() == "cpus" else "slots",
                    help="the plugin's NUMA_CAPACITY mode (default from $NUMA_CAPACITY, else slots)")
    group.addoption("--pod-timeout", type=float, default=180.0,
                    help="seconds a pod may take to print its probe output (default 180)")
    group.addoption("--expect-topology-policy", default="single-numa-node")
    group.addoption("--expect-memory-policy", default="Static")
    group.addoption("--plugin-service", default="numa-align", help="systemd unit of the plugin on workers")
    group.addoption("--agent-service", default=os.environ.get("NUMALAB_AGENT_SERVICE", "auto"),
                    help="systemd unit that runs the kubelet (default $NUMALAB_AGENT_SERVICE, else auto: "
                         "kubelet where that unit exists (upstream), else rke2-agent)")
    group.addoption("--inspect-command", default=DEFAULT_REMOTE_COMMAND,
                    help=f"how to start the node inspector over SSH (default {DEFAULT_REMOTE_COMMAND!r})")
    group.addoption("--restart-worker", default=None,
                    help="worker whose agent the restart case restarts (default: the first by name)")
    group.addoption("--ssh-host-format", default="{node}",
                    help="ssh_config Host of a worker, from its node name (default '{node}')")
    group.addoption("--prometheus-url", default=os.environ.get("NUMALAB_PROMETHEUS_URL", ""),
                    help="Prometheus scraping numa-align (the lab's: http://REGISTRY_ADDRESS:9090; default "
                         "$NUMALAB_PROMETHEUS_URL, else none: the prometheus case is n/a)")
    group.addoption("--explain-pairs", choices=("all", "closest"), default="all",
                    help="case 8's pairs: all (default), or closest: only those of workers under restricted or "
                         "best-effort with prefer-closest-numa-nodes (a failing row when no worker has any)")


def _ssh_config(config: pytest.Config) -> str | None:
    """testinfra's --ssh-config (shared with the inspector), else $NUMALAB_SSH_CONFIG."""
    return config.option.ssh_config or os.environ.get("NUMALAB_SSH_CONFIG") or None


def _settings(config: pytest.Config) -> Settings:
    opt = config.option
    ssh_config = _ssh_config(config)
    return Settings(
        kubeconfig=Path(opt.kubeconfig).expanduser(),
        ssh_config=Path(ssh_config).expanduser() if ssh_config else Path(),
        probe_image=opt.probe_image,
        capacity_mode=opt.capacity_mode,
        pod_timeout=opt.pod_timeout,
        expect_topology_policy=opt.expect_topology_policy,
        expect_memory_policy=opt.expect_memory_policy,
        plugin_service=opt.plugin_service,
        agent_service=opt.agent_service,
        inspect_command=opt.inspect_command,
        restart_worker=opt.restart_worker,
        ssh_host_format=opt.ssh_host_format,
        prometheus_url=opt.prometheus_url.strip(),
        explain_pairs=opt.explain_pairs,
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, with the kubeconfig's name, when there is no cluster to test."""
    config = session.config
    config.stash[_RESULTS_KEY] = Results()
    if config.option.collectonly or config.option.help:
        return
    settings = _settings(config)
    try:
        api = connect(settings.kubeconfig)
    except ClusterUnreachable as exc:
        pytest.exit(f"e2e: no cluster reachable: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    if not _ssh_config(config):
        pytest.exit("e2e: no ssh_config for the workers: pass --ssh-config or set NUMALAB_SSH_CONFIG",
                    returncode=pytest.ExitCode.USAGE_ERROR)
    if not settings.ssh_config.is_file():
        pytest.exit(f"e2e: ssh_config {settings.ssh_config} does not exist", returncode=pytest.ExitCode.USAGE_ERROR)
    namespace = f"numalab-e2e-{time.strftime('%H%M%S')}-{secrets.token_hex(2)}"
    cluster = Cluster(api, namespace, settings.pod_timeout)
    try:
        if not cluster.workers():
            pytest.exit(f"e2e: no node of the cluster behind {settings.kubeconfig} advertises numa-align/numa-N "
                        "(is the numa-align plugin running on the workers?)", returncode=pytest.ExitCode.USAGE_ERROR)
        cluster.create_namespace()
    except ApiException as exc:
        pytest.exit(f"e2e: cluster behind {settings.kubeconfig} refused to list nodes or create namespace "
                    f"{namespace}: {exc.status} {exc.reason}", returncode=pytest.ExitCode.USAGE_ERROR)
    config.stash[_CLUSTER_KEY] = cluster


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Delete the run's namespace, whether the cases passed, failed or were interrupted."""
    cluster = session.config.stash.get(_CLUSTER_KEY, None)
    if cluster is not None and not cluster.delete_namespace():
        print(f"\ne2e: namespace {cluster.namespace} is still terminating; delete it by hand if it stays")
    if summary := outages.summary():
        print(f"\ne2e: {summary}")


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    results = config.stash.get(_RESULTS_KEY, None)
    if results is not None and results.rows:
        terminalreporter.section("numa-lab e2e: worker x NUMA node x case")
        terminalreporter.write_line(results.table())


@pytest.fixture(scope="session")
def settings(pytestconfig: pytest.Config) -> Settings:
    return _settings(pytestconfig)


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Cluster:
    return pytestconfig.stash[_CLUSTER_KEY]


@pytest.fixture(scope="session")
def results(pytestconfig: pytest.Config) -> Results:
    return pytestconfig.stash[_RESULTS_KEY]


@pytest.fixture(scope="session")
def workers(cluster: Cluster) -> dict[str, list[int]]:
    """Worker name -> its NUMA node ids, from the numa-align resources each one advertises."""
    return cluster.workers()


@pytest.fixture(scope="session")
def policies(cluster: Cluster, workers: dict[str, list[int]]) -> dict[str, dict[str, str]]:
    """Worker name -> the kubelet's manager policies, from its /configz."""
    return {worker: cluster.policies(worker) for worker in workers}


@pytest.fixture(scope="session")
def pod_cpus(cluster: Cluster, workers: dict[str, list[int]], hosts) -> dict[str, dict[int, int]]:
    """Worker -> NUMA node -> how many of its online CPUs are outside the kubelet's reservedSystemCPUs
    (a node's cpulist still names offline CPUs; only /sys/devices/system/cpu/online tells them apart)."""
    found = {}
    for worker, nodes in workers.items():
        reserved = parse_cpulist(cluster.configz(worker)["kubeletconfig"].get("reservedSystemCPUs") or "")
        online = parse_cpulist(hosts[worker].file("/sys/devices/system/cpu/online").content_string.strip())
        found[worker] = {
            node: len(parse_cpulist(hosts[worker].file(f"/sys/devices/system/node/node{node}/cpulist")
                                    .content_string.strip()) & online - reserved)
            for node in nodes
        }
    return found


@pytest.fixture(scope="session")
def pinned_cpus(cluster: Cluster, workers: dict[str, list[int]], hosts) -> dict[str, int]:
    """Worker -> CPUs a pinned pod asks for: a whole core (its threads) where the CPU Manager runs with
    full-pcpus-only, which refuses anything else (SMTAlignmentError); else 1."""
    found = {}
    for worker in workers:
        options = cluster.configz(worker)["kubeletconfig"].get("cpuManagerPolicyOptions") or {}
        found[worker] = 1
        if options.get("full-pcpus-only") == "true":
            lists = hosts[worker].check_output("cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list")
            found[worker] = max(len(parse_cpulist(line)) for line in lists.splitlines() if line.strip())
    return found


@pytest.fixture(scope="session")
def ssh_control_dir() -> Iterator[Path]:
    """Where the workers' shared SSH connections live: testinfra runs every check as its own ssh command,
    and without a ControlPath each one is a new handshake (seconds on an emulated guest)."""
    path = Path(tempfile.mkdtemp(prefix="numalab-ssh-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def hosts(pytestconfig: pytest.Config, settings: Settings, workers: dict[str, list[int]], ssh_control_dir: Path):
    """Worker name -> testinfra host over ssh with the lab's ssh_config (testinfra's --sudo applies), one
    SSH connection per worker for the run (ControlMaster, kept 60 s after its last use)."""
    return {
        worker: testinfra.get_host(f"ssh://{settings.ssh_host(worker)}", ssh_config=str(settings.ssh_config),
                                   sudo=pytestconfig.option.sudo, controlpath=str(ssh_control_dir / "%%C"))
        for worker in workers
    }


@pytest.fixture(scope="session")
def inspect_node(settings: Settings, hosts, results: Results):
    """Run `numa-align inspect` on a worker over SSH; returns its JSON report. A PodResources timeout is asked
    once more (inspect_retry.py) and shown as an n/a `inspect-retry` row with the kubelet's journal."""

    def run(worker: str) -> dict:
        asked = inspect_twice(
            lambda: remote_inspect(settings.ssh_host(worker), settings.ssh_config, settings.inspect_command),
            lambda: hosts[worker].run(JOURNAL_COMMAND).stdout)
        if asked.timed_out:
            results.add(worker, ALL_NODES, "inspect-retry", None,
                        detail=f"answered {ASK_AGAIN_AFTER:.0f} s after a timeout: {asked.timed_out}; the kubelet's "
                               f"journal of the minute before: {asked.journal}")
        return asked.report

    return run
