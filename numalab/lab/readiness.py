"""Waiting for a guest to be ready for pyinfra: SSH answers and its first boot has finished.

A started domain is not yet usable: the wait also notices a domain that stopped while booting, and every
failure names the guest's console log, where the reason is.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from typing import TYPE_CHECKING

from numalab.lab.errors import LabError
from numalab.lab.libvirt_objects import lookup_or_none
from numalab.lab.remote import proxy_jump
from numalab.lab.settings import Settings
from numalab.lab.spec import Guest
from numalab.progress import say

if TYPE_CHECKING:
    from numalab.lab.provisioning import LabHost

log = logging.getLogger(__name__)

SSH_PORT = 22
DEFAULT_SSH_TIMEOUT = 600.0


class SSHTimeout(LabError):
    """A guest did not reach SSH in time; the message names its console log."""


def wait_for_ssh(host: LabHost, guest: Guest, timeout: float = DEFAULT_SSH_TIMEOUT) -> float:
    """Block (cooperatively under gevent) until the guest is ready; seconds waited.

    Ready means sshd answers and the first boot has finished. The lab's image orders sshd after
    its first-boot unit, so the banner is enough there; on a cloud image cloud-init's config stage
    runs beside sshd and may restart it (set_passwords does), refusing connections for a moment
    after the first banner, so its end is awaited over SSH. A timeout says which of the two never
    happened, with the last answer seen, besides naming the console log.
    """
    started = time.monotonic()
    deadline = started + timeout
    banner_at: float | None = None
    why = "nothing tried yet"
    while time.monotonic() < deadline:
        why = _ssh_banner(host, guest)
        if why is None:
            banner_at = banner_at if banner_at is not None else time.monotonic() - started
            why = _cloud_init_done(host, guest, deadline)
            if why is None:
                waited = time.monotonic() - started
                say(f"{guest.name}: SSH ready after {waited:.1f} s")
                return waited
        domain = lookup_or_none(host.conn.lookupByName, host.lab.domain_name(guest))
        if domain is None or not domain.isActive():
            raise LabError(
                f"{guest.name}: domain {host.lab.domain_name(guest)} stopped while booting; "
                f"see its console log {host.console_log(guest)}"
            )
        time.sleep(2)
    banner = "never answered" if banner_at is None else f"answered first after {banner_at:.0f} s"
    raise SSHTimeout(
        f"{guest.name}: SSH at {guest.address}:{SSH_PORT} not ready after {timeout:.0f} s "
        f"(sshd {banner}; last: {why}); see its console log {host.console_log(guest)}"
    )


def _cloud_init_done(host: LabHost, guest: Guest, deadline: float) -> str | None:
    """Wait for cloud-init over SSH where there is one: None when done, else why not (try again)."""
    if not _image_has_cloud_init(host.settings):
        return None
    try:
        done = subprocess.run(
            ["ssh", "-F", str(host.ssh_config), guest.name, "cloud-init status --wait"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=max(deadline - time.monotonic(), 1),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`cloud-init status --wait` over SSH had not returned when the time ran out"
    if done.returncode == 255:  # ssh's own failure: sshd restarting, or not listening yet
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"ssh exited 255: {said[-1] if said else 'no message'}"
    if done.returncode != 0:
        status = (done.stdout + done.stderr).decode(errors="replace").strip()
        log.warning("%s: cloud-init finished with errors (exit %d): %s", guest.name, done.returncode, status)
    return None


def _image_has_cloud_init(settings: Settings) -> bool:
    """The lab's own image has none (its first boot runs before sshd); a cloud image has it."""
    return bool(settings.image)


def _ssh_banner(host: LabHost, guest: Guest) -> str | None:
    """None when sshd sent its banner, else why not."""
    jump = proxy_jump(host.settings.uri)
    if jump is None:
        try:
            with socket.create_connection((str(guest.address), SSH_PORT), timeout=5) as sock:
                sock.settimeout(5)
                first = sock.recv(4)
        except OSError as exc:
            return f"no SSH banner: {exc.strerror or exc}"
        return None if first.startswith(b"SSH-") else f"no SSH banner: got {first!r}"
    try:
        probe = subprocess.run(
            ["ssh", "-F", str(host.ssh_config), "-W", f"{guest.address}:{SSH_PORT}", jump],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no SSH banner through {jump} within 30 s"
    if probe.stdout.startswith(b"SSH-"):
        return None
    said = probe.stderr.decode(errors="replace").strip().splitlines()
    return f"no SSH banner through {jump}: {said[-1] if said else 'no answer'}"
