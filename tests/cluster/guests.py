"""What a failed cluster test needs to say about its guests: each kubelet's and control-plane unit's
restarts, OOM kills, and the kernel's Oops/panic lines from the host-side console logs (which survive a
guest's reboot, where the guest's own dmesg does not). Printed at the end of the failure message, the
part of a long CI log that is always shown."""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.lab.consoles import console_logs

SERVER_UNITS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
KERNEL_TROUBLE = re.compile(r"Oops|Kernel panic|BUG:|RIP: 0010|blocked for more than|Out of memory|oom-kill")
BOOT_LINE = re.compile(r"numalab-firstboot: \S+ is \S+ on ")


@functools.cache
def control_dir() -> Path:
    """Where ssh keeps one connection per guest for the test's commands (a short path: a socket's is limited to
    104 bytes). A new connection is a key exchange and a login on an emulated guest: 1.5 s a command on an idle
    lab, against 0.1 s through a kept one (measured on the cluster test's lab)."""
    path = Path(tempfile.mkdtemp(prefix="numalab-ssh-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def ssh_options() -> list[str]:
    """The shared connection, kept 60 s after its last use. A guest reset or powered off under it answers
    nothing: the keepalives end it within 15 s, the command through it fails (rc 255) as a new connection to a
    guest that is down would, and the next command makes a new one."""
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir()}/%C", "-o", "ControlPersist=60",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]


def ssh(state: Path, host: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(state / "ssh_config"), *ssh_options(), host, command],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def boot_id(state: Path, host: str) -> str:
    """The guest's boot id ('' while it does not answer): a new one means it booted again."""
    return ssh(state, host, "cat /proc/sys/kernel/random/boot_id").stdout.strip()


def wait_booted(state: Path, host: str, before: str, timeout: float = 300.0) -> float:
    """Seconds until `host` answers with a boot id other than `before`; AssertionError after `timeout`."""
    started = time.monotonic()
    while boot_id(state, host) in ("", before):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{host} booted again: not after {timeout:.0f} s")
        time.sleep(3)
    return time.monotonic() - started


def _units(units: tuple[str, ...]) -> str:
    """One line per unit: active state, restarts by systemd (a crash, not `systemctl restart`), start time;
    then each unit's last exits, and the guest kernel's OOM kills."""
    shows = "; ".join(f"echo {unit}: $(systemctl show {unit} -p ActiveState -p NRestarts -p ExecMainStartTimestamp"
                      " | tr '\\n' ' ')" for unit in units)
    journal = " ".join(f"-u {unit}" for unit in units)
    return (f"uptime; {shows}; journalctl {journal} --no-pager -o short-monotonic | "
            "grep -E 'Main process exited|Failed with result|Scheduled restart|Started' | tail -n 8; "
            "dmesg | grep -iE 'out of memory|oom-kill|killed process' | tail -n 5")


def guest_history(state: Path, workers: tuple[str, ...]) -> str:
    """Every guest's boots and kernel trouble (console logs), the server's control plane and each
    worker's kubelet (over SSH)."""
    parts = ["", "guest history:"]
    for log in console_logs(state):
        lines = log.read_text(errors="replace").replace("\r", "").splitlines()
        boots = sum(1 for line in lines if BOOT_LINE.search(line))
        trouble = [line for line in lines if KERNEL_TROUBLE.search(line)]
        parts.append(f"--- {log.stem}: booted {boots} time(s); kernel trouble: {len(trouble)} line(s)")
        parts.extend(trouble[:12])  # the first Oops and its RIP say what happened; a panic repeats them
    for host, units in (("server", SERVER_UNITS), *((worker, ("kubelet",)) for worker in workers)):
        try:
            seen = ssh(state, host, _units(units))
            parts.append(f"--- {host} (ssh rc {seen.returncode})\n{seen.stdout.strip()}\n{seen.stderr.strip()}")
        except subprocess.TimeoutExpired:
            parts.append(f"--- {host}: ssh timed out after 120 s (the guest may be wedged; see its kernel lines)")
    return "\n".join(parts)
