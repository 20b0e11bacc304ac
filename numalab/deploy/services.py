"""A systemd unit enabled and running, restarted when a file it reads changed, and never started twice.

pyinfra 3 reads an operation's facts when the operation runs. A "restart if changed" placed after "enabled and
running" therefore finds running the unit this very run started, on its new files, and restarts it: on a
first install every component started twice. For kube-apiserver that is a second start of half a minute on
an emulated guest, with the readiness wait after it; for the kubelet, a second registration. Whether the unit
ran before the run is read while planning instead, and only a unit that did is restarted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyinfra import host
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import systemd
from pyinfra.operations.util import any_changed


def ran_before_this_run(service: str) -> bool:
    """Whether `service` is active now, read while planning (before any operation of the run)."""
    unit = service if "." in service else f"{service}.service"
    return bool(host.get_fact(SystemdStatus, services=[unit]).get(unit))


def running_and_current(service: str, name: str, restart_name: str, changed: Iterable[Any]) -> Any:
    """`service` enabled and running; restarted when an operation in `changed` changed something, only if it
    was running before this run. Returns the "enabled and running" operation."""
    was_running = ran_before_this_run(service)
    started = systemd.service(name=name, service=service, running=True, enabled=True)
    if was_running:
        systemd.service(name=restart_name, service=service, restarted=True, _if=any_changed(*changed))
    return started
