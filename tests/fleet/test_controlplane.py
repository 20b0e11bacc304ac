"""The fleet control plane without its real binaries: bad input refused before anything starts, teardown after
a failure, an exception or Ctrl-C (grandchildren included), and what each process is started with.

The stand-ins are one Python script (SERVER) that answers 200 on the port each real program is told
(--secure-port, --listen-client-urls, --server-address), over HTTPS when given --tls-cert-file, so the
readiness checks verify it against the fleet's CA like the real ones. With FLEET_FAKE_CHILDREN set it also
starts a `sleep` child and writes `<its pid> <child pid>` there.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml

from numalab.fleet import components, memory, processes
from numalab.fleet.binaries import FleetBinaries, fleet_binaries
from numalab.fleet.controlplane import ControlPlane
from numalab.fleet.errors import FleetError
from numalab.fleet.ports import assign_ports
from numalab.model.errors import ValidationError
from numalab.model.numa_scheduler import numa_scheduler_configuration

SERVER = """\
#!{python}
import http.server, os, re, ssl, subprocess, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
where = args.get("secure-port") or args.get("listen-client-urls") or args.get("server-address")
port = int(re.search(r"(\\d+)$", where).group(1))
children = os.environ.get("FLEET_FAKE_CHILDREN")
if children:
    child = subprocess.Popen(["sleep", "300"])
    with open(os.path.join(children, str(os.getpid())), "w") as out:
        out.write(f"{{os.getpid()}} {{child.pid}}")
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Health)
if "tls-cert-file" in args:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args["tls-cert-file"], args["tls-private-key-file"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print("fake", os.path.basename(sys.argv[0]), "serving on", port, flush=True)
server.serve_forever()
"""
FAILING = "#!/bin/sh\necho \"$0: bind: address already in use\"\nexit 1\n"
STUBBORN = "#!/bin/sh\ntrap '' TERM\necho \"$0 starting, never ready\"\nwhile true; do sleep 0.1; done\n"


def write_script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_binaries(directory: Path, **scripts: str) -> FleetBinaries:
    """Every binary a serving fake, except those given as field=script text (FAILING, STUBBORN, ...)."""
    paths = {}
    for field in ("etcd", "kube_apiserver", "kube_controller_manager", "kube_scheduler", "numa_scheduler", "kwok"):
        text = scripts.get(field, SERVER.format(python=sys.executable))
        paths[field] = write_script(directory / field.replace("_", "-"), text)
    return FleetBinaries(**paths)


def gone(pid: int, wait: float = 3.0) -> bool:
    """No such process (a zombie counts as gone: it runs nothing), waiting up to `wait` s for init to reap it."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            return True
        if state == "Z" or time.monotonic() > deadline:
            return state == "Z"
        time.sleep(0.05)


STRATEGIES = ["MostAllocated", "LeastNUMANodes"]
NAMES = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "numa-scheduler-mostallocated",
         "numa-scheduler-leastnumanodes", "kwok"}


@pytest.fixture
def no_lab_objects(monkeypatch):
    """The CRD and RBAC need a real API server; the fakes only answer health checks."""
    monkeypatch.setattr(ControlPlane, "_apply_lab_objects", lambda self: None)


@pytest.fixture
def children(tmp_path, monkeypatch):
    directory = tmp_path / "children"
    directory.mkdir()
    monkeypatch.setenv("FLEET_FAKE_CHILDREN", str(directory))
    return directory


def plane(tmp_path: Path, binaries: FleetBinaries, **options) -> ControlPlane:
    options = {"ready_timeout": 15.0, "stop_grace": 1.0, **options}
    return ControlPlane(tmp_path / "work", binaries, STRATEGIES, **options)


def started_pids(children: Path) -> list[int]:
    """Every fake's pid and its `sleep` child's."""
    return [int(pid) for entry in children.iterdir() for pid in entry.read_text().split()]


def assert_nothing_left(pids, directory: Path | None = None) -> None:
    assert pids
    assert [pid for pid in pids if not gone(pid)] == []
    if directory is not None:
        assert not directory.exists()


def test_a_started_plane_says_where_everything_is_and_leaves_nothing_after_an_exception(
        tmp_path, children, no_lab_objects):
    seen = {}
    with pytest.raises(RuntimeError, match="boom"):
        with plane(tmp_path, fake_binaries(tmp_path / "bin")) as started:
            seen = {"pids": started.pids, "directory": started.directory, "url": started.api_url,
                    "names": started.scheduler_names, "kubeconfig": yaml.safe_load(started.kubeconfig.read_text()),
                    "metrics": started.metrics_text("kube-apiserver"), "etcd": started.metrics_text("etcd"),
                    "startup": started.startup_seconds}
            raise RuntimeError("boom")
    assert set(seen["pids"]) == NAMES
    assert seen["url"].startswith("https://127.0.0.1:")
    assert seen["kubeconfig"]["clusters"][0]["cluster"]["server"] == seen["url"]
    assert seen["names"] == {"default": "default-scheduler", "MostAllocated": "numa-aware-mostallocated",
                             "LeastNUMANodes": "numa-aware-leastnumanodes"}
    assert seen["metrics"] == seen["etcd"] == "ok"
    assert seen["startup"] is not None
    assert_nothing_left(started_pids(children), seen["directory"])
    assert set(seen["pids"].values()) <= set(started_pids(children))


def test_ctrl_c_in_the_block_stops_every_process_and_its_children(tmp_path, children, no_lab_objects):
    with pytest.raises(KeyboardInterrupt):
        with plane(tmp_path, fake_binaries(tmp_path / "bin")) as started:
            directory = started.directory
            raise KeyboardInterrupt
    assert_nothing_left(started_pids(children), directory)


def test_ctrl_c_while_starting_stops_what_had_started(tmp_path, children, no_lab_objects, monkeypatch):
    real = processes.wait_ready

    def interrupted(process, *args):
        if process.name == "kube-apiserver":
            raise KeyboardInterrupt
        return real(process, *args)

    monkeypatch.setattr(processes, "wait_ready", interrupted)
    interrupted_plane = plane(tmp_path, fake_binaries(tmp_path / "bin"))
    with pytest.raises(KeyboardInterrupt):
        with interrupted_plane:
            pass
    assert list(interrupted_plane.pids) == ["etcd", "kube-apiserver"]
    assert_nothing_left([*interrupted_plane.pids.values(), *started_pids(children)])
    assert list((tmp_path / "work").iterdir()) == []


def test_keep_leaves_the_directory_with_a_log_per_process(tmp_path, no_lab_objects):
    with plane(tmp_path, fake_binaries(tmp_path / "bin"), keep=True) as started:
        logs = started.logs
    assert set(logs) == NAMES
    assert all("serving on" in log.read_text() for log in logs.values())
    assert (started.directory / "kwok.yaml").is_file()


def test_a_process_that_exits_while_starting_is_named_with_its_log_and_the_others_are_stopped(
        tmp_path, children, no_lab_objects):
    failing = fake_binaries(tmp_path / "bin", kube_apiserver=FAILING)
    with pytest.raises(FleetError) as raised:
        with plane(tmp_path, failing):
            pass
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("kube-apiserver exited with 1 while starting; last lines of ")
    assert message.endswith("kube-apiserver: bind: address already in use")
    assert_nothing_left(started_pids(children))  # etcd's
    assert list((tmp_path / "work").iterdir()) == []


def test_a_process_never_ready_times_out_naming_it_and_is_killed(tmp_path, children, no_lab_objects):
    stubborn = fake_binaries(tmp_path / "bin", kube_scheduler=STUBBORN)
    with pytest.raises(FleetError, match=r"^kube-scheduler not ready at https://127\.0\.0\.1:\d+/readyz after 2 s "
                                         r"\(.*\); last lines of .*kube-scheduler\.log: .*never ready$"):
        with plane(tmp_path, stubborn, ready_timeout=1.5):
            pass
    assert_nothing_left(started_pids(children))


def test_stop_all_kills_what_ignores_sigterm(tmp_path):
    process = processes.start("stubborn", [str(write_script(tmp_path / "stubborn", STUBBORN))], tmp_path / "log")
    time.sleep(0.3)  # let the trap be set
    assert processes.stop_all([process], grace=0.5) == ["stubborn"]
    assert process.popen.returncode == -signal.SIGKILL
    assert gone(process.pid)


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(FleetError, match=f"^port {port} for kube-apiserver on 127.0.0.1 is in use; "):
            with plane(tmp_path, fake_binaries(tmp_path / "bin"), ports={"kube-apiserver": port}):
                pass
    assert not (tmp_path / "work").exists()


def test_fixed_ports_are_checked_and_the_rest_are_free_and_distinct():
    with pytest.raises(FleetError, match="unknown components kube-apiservr"):
        assign_ports(["etcd", "kube-apiserver"], {"kube-apiservr": 6443})
    with pytest.raises(FleetError, match="given to both etcd and kwok"):
        assign_ports(["etcd", "kwok"], {"etcd": 40001, "kwok": 40001})
    with pytest.raises(FleetError, match="is not a TCP port"):
        assign_ports(["etcd"], {"etcd": 70000})
    ports = assign_ports(["etcd", "etcd-peer", "kube-apiserver"])
    assert len(set(ports.values())) == 3


def test_a_missing_binary_is_named_with_the_command_that_builds_it(tmp_path):
    binaries = fake_binaries(tmp_path / "bin")
    (tmp_path / "bin" / "kwok").unlink()
    with pytest.raises(FleetError, match=r"^the kwok binary .*/bin/kwok is missing; build it with "
                                         r"`python -m numalab\.fleet\.build`$"):
        with plane(tmp_path, binaries):
            pass
    assert not (tmp_path / "work").exists()


def test_an_empty_cache_names_the_first_binary_missing_and_the_build_command(tmp_path):
    with pytest.raises(FleetError, match=r"go:v1\.36\.3 is not built yet .*`python -m numalab\.fleet\.build`"):
        fleet_binaries(tmp_path / "empty-cache")


def meminfo(tmp_path: Path, available_kib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {2 * available_kib} kB\nMemAvailable:   {available_kib} kB\n")
    return path


def test_a_scale_above_available_memory_is_refused_with_both_figures(tmp_path):
    small = meminfo(tmp_path, 1024 * 1024)  # 1 GiB
    with pytest.raises(FleetError, match=r"^5000 nodes and 100000 pods need about [\d,]+ MiB for the control plane, "
                                         r"more than 80% of MemAvailable 1,024 MiB on this machine; "):
        with plane(tmp_path, fake_binaries(tmp_path / "bin"), nodes=5000, pods=100000, meminfo=small):
            pass
    assert not (tmp_path / "work").exists()
    assert memory.check_memory(100, 1000, meminfo(tmp_path, 64 * 1024 * 1024)) == memory.estimate_memory(100, 1000)


def test_the_estimate_grows_with_nodes_and_pods_and_refuses_nonsense(tmp_path):
    assert memory.estimate_memory(0, 0) > 0
    assert memory.estimate_memory(1000, 0) > memory.estimate_memory(100, 0)
    assert memory.estimate_memory(100, 10000) > memory.estimate_memory(100, 0)
    with pytest.raises(FleetError, match="-1 nodes"):
        memory.estimate_memory(-1, 0)
    (tmp_path / "no-line").write_text("MemTotal: 1 kB\n")
    with pytest.raises(FleetError, match="has no MemAvailable line"):
        memory.mem_available(tmp_path / "no-line")


def test_an_unknown_or_repeated_strategy_is_refused(tmp_path):
    binaries = fake_binaries(tmp_path / "bin")
    for strategies, what in ((["MostAlocated"], "unknown scoring strategy 'MostAlocated'"),
                             (["MostAllocated", "MostAllocated"], "a strategy named twice")):
        with pytest.raises(FleetError, match=what):
            with ControlPlane(tmp_path / "work", binaries, strategies):
                pass
    assert not (tmp_path / "work").exists()


def test_the_lab_scheduler_configuration_is_unchanged_by_the_strategy_parameter():
    lab = numa_scheduler_configuration()
    assert lab["clientConnection"] == {"kubeconfig": "/etc/kubernetes/numa-scheduler.conf"}
    assert lab["leaderElection"]["leaderElect"] is True
    assert lab["leaderElection"]["resourceName"] == "numa-scheduler"
    profile = lab["profiles"][0]
    assert profile["schedulerName"] == "numa-aware"
    assert profile["pluginConfig"][0]["args"]["scoringStrategy"] == {"type": "LeastAllocated"}
    with pytest.raises(ValidationError, match="scoringStrategy.type: expected one of"):
        numa_scheduler_configuration("Nope")


def test_each_numa_scheduler_scores_by_its_strategy_under_its_own_name_without_election(tmp_path):
    layout = components.Layout(tmp_path)
    document = yaml.safe_load(components.numa_scheduler_config(layout, "BalancedAllocation"))
    assert document["clientConnection"]["kubeconfig"] == str(tmp_path / "numa-scheduler.conf")
    assert document["leaderElection"] == {"leaderElect": False}
    profile = document["profiles"][0]
    assert profile["schedulerName"] == "numa-aware-balancedallocation"
    args = profile["pluginConfig"][0]["args"]
    assert args["scoringStrategy"] == {"type": "BalancedAllocation"}
    assert args["cache"] == numa_scheduler_configuration()["profiles"][0]["pluginConfig"][0]["args"]["cache"]
    assert args["cacheResyncPeriodSeconds"] == 5  # the lab's, unless told
    other = yaml.safe_load(components.numa_scheduler_config(layout, "BalancedAllocation", resync_seconds=3600))
    assert other["profiles"][0]["pluginConfig"][0]["args"]["cacheResyncPeriodSeconds"] == 3600
    assert "--v=0" in components.numa_scheduler_args(Path("/bin/true"), layout, 6, "BalancedAllocation")


def test_kwok_keeps_its_node_stages_and_gets_one_pod_stage_that_never_matches():
    options, stage = yaml.safe_load_all(components.kwok_config())
    assert options["kind"] == "KwokConfiguration"
    assert options["options"]["enableDebuggingHandlers"] is False
    assert stage["kind"] == "Stage" and stage["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    assert stage["spec"]["selector"] == {"matchExpressions": [{"key": ".metadata.uid", "operator": "DoesNotExist"}]}


def test_every_process_listens_on_loopback_only_with_the_controllers_deployments_need(tmp_path):
    layout, binary = components.Layout(tmp_path), Path("/bin/true")
    commands = [components.etcd_args(binary, layout, 1, 2), components.apiserver_args(binary, layout, 3, 1),
                components.controller_manager_args(binary, layout, 4, components.CONTROLLERS),
                components.scheduler_args(binary, layout, 5),
                components.numa_scheduler_args(binary, layout, 6, "LeastNUMANodes"),
                components.kwok_args(binary, layout, 7)]
    text = " ".join(" ".join(argv) for argv in commands)
    assert "0.0.0.0" not in text and "localhost" not in text
    assert "--controllers=deployment,replicaset,podgc" in commands[2]
    apiserver = dict(arg[2:].split("=", 1) for arg in commands[1] if "=" in arg)
    assert apiserver["bind-address"] == "127.0.0.1"
    assert "TaintNodesByCondition" in apiserver["disable-admission-plugins"].split(",")
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in commands[5]
    assert f"--config={tmp_path / 'numa-scheduler-leastnumanodes.yaml'}" in commands[4]


def test_a_work_directory_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("a file, not a directory\n")
    with pytest.raises(FleetError, match=r"^cannot prepare the control plane under .*/taken: "):
        with ControlPlane(tmp_path / "taken", fake_binaries(tmp_path / "bin"), STRATEGIES):
            pass


def test_a_process_stopped_and_started_again_gets_a_new_pid_and_nothing_outlives_the_plane(
        tmp_path, children, no_lab_objects):
    with plane(tmp_path, fake_binaries(tmp_path / "bin")) as started:
        first = started.pids["kube-scheduler"]
        started.stop_process("kube-scheduler")
        assert "kube-scheduler" not in started.pids and gone(first)
        with pytest.raises(FleetError, match=r"^no process 'kube-scheduler' running in this control plane"):
            started.stop_process("kube-scheduler")
        started.start_process("kube-scheduler")
        again = started.pids["kube-scheduler"]
        assert again != first and not gone(again, wait=0)
        with pytest.raises(FleetError, match=r"^kube-scheduler is running already"):
            started.start_process("kube-scheduler")
        with pytest.raises(FleetError, match=r"^no process 'kubelet' was started in this control plane"):
            started.start_process("kubelet")
        directory = started.directory
    assert_nothing_left([*started_pids(children), again], directory)
