"""A unit this run starts is not restarted too (pyinfra reads a restart's facts when it runs, after the start);
a unit that ran before the run is restarted when a file it reads changed, and left alone when none did."""

from __future__ import annotations

from io import StringIO

import pytest
from pyinfra.connectors.fake import FakeConnector
from pyinfra.connectors.util import CommandOutput, OutputLine
from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy.services import running_and_current
from tests.fakehost import execute, fake_host


@pytest.fixture
def unit(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A @fake host's `demo.service` that systemctl starts and stops as a real one would: `systemctl show` says
    what the commands run so far made of it (the stock fake answers the same whatever ran before)."""
    state = {"running": False}

    def answer(self: FakeConnector, command: str) -> tuple[bool, CommandOutput]:
        if "systemctl start demo" in command or "systemctl restart demo" in command:
            state["running"] = True
        if "systemctl show" in command and "demo.service" in command:
            sub = "running" if state["running"] else "dead"
            lines = ["Id=demo.service", f"SubState={sub}"]
            return True, CommandOutput([OutputLine("stdout", line) for line in lines])
        return True, CommandOutput([])

    monkeypatch.setattr(FakeConnector, "_lookup_response", answer)
    return state


def controls(commands: list[str]) -> list[str]:
    return [c.split("systemctl ", 1)[1] for c in commands if "systemctl start" in c or "systemctl restart" in c]


def deployed(config: str | None) -> list[str]:
    """The stage: demo's config written (`config` None: already current), then the unit running and current."""
    with fake_host() as host:
        changed = [files.put(name="demo config", src=StringIO(config), dest="/etc/demo.conf")] if config else []
        running_and_current("demo", "demo enabled and running", "Restart demo for its new config", changed)
        return controls(execute(host))


def test_a_unit_this_run_starts_is_started_once(unit: dict[str, bool]) -> None:
    assert deployed("new") == ["start demo.service"]
    assert unit["running"]


def test_the_two_operations_alone_restart_what_the_run_just_started(unit: dict[str, bool]) -> None:
    """The baseline the helper exists for: the fake unit does what systemd does, and the plain pair of
    operations starts and then restarts a unit that was not running."""
    with fake_host() as host:
        config = files.put(name="demo config", src=StringIO("new"), dest="/etc/demo.conf")
        systemd.service(name="demo enabled and running", service="demo", running=True, enabled=True)
        systemd.service(name="Restart demo", service="demo", restarted=True, _if=any_changed(config))
        assert controls(execute(host)) == ["start demo.service", "restart demo.service"]


def test_a_unit_that_ran_before_is_restarted_for_a_changed_file_only(unit: dict[str, bool]) -> None:
    unit["running"] = True
    assert deployed("new") == ["restart demo.service"]
    assert deployed(None) == []
