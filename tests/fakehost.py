"""One pyinfra host for operation tests: @fake (facts answered from `fake_responses`) or @local (facts and
commands run for real on this machine, for operations pointed at temp files). Plan operations on it, read the
commands one operation yields, or run them all and read what the @fake connector was asked to do."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyinfra import context
from pyinfra.api import Config, FileUploadCommand, Inventory, State, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state

FAKE = "@fake/node"


@contextmanager
def fake_host(**data: Any) -> Iterator[Host]:
    """A connected @fake host in the Prepare stage, current for operations called in the block."""
    with _connected(FAKE, {"fake_delay": 0, "fake_delay_jitter": 0, **data}) as host:
        yield host


@contextmanager
def local_host() -> Iterator[Host]:
    """This machine as a pyinfra host: only for operations on files under a test's tmp_path."""
    with _connected("@local", {}) as host:
        yield host


@contextmanager
def _connected(name: str, data: dict[str, Any]) -> Iterator[Host]:
    state = State(Inventory(([name], data)), Config())
    state.set_stage(StateStage.Connect)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    host = state.inventory.get_host(name)
    with ctx_state.use(state), ctx_host.use(host):
        yield host


def commands_of(op: OperationMeta) -> list[Any]:
    """The commands `op` yields on the current host, as pyinfra would run them."""
    return list(context.state.get_op_data_for_host(context.host, op._hash).command_generator())


def execute(host: Host) -> list[str]:
    """Run every planned operation on `host`; the shell commands a @fake connector was given, in order."""
    state = host.state
    state.set_stage(StateStage.Execute)
    run_ops(state)
    assert not state.failed_hosts
    return getattr(host.connector, "executed_commands", [])


def run_with_sh(commands: list[Any], upload: Any) -> None:
    """Run shell commands for real with `sh -e`; `upload(command)` stands in for each FileUploadCommand."""
    for command in commands:
        if isinstance(command, FileUploadCommand):
            upload(command)
        else:
            text = command.get_raw_value() if isinstance(command, StringCommand) else str(command)
            subprocess.run(["sh", "-ec", text], check=True, capture_output=True, text=True)


def upload_as_sftp(command: FileUploadCommand) -> Path:
    """What an SFTP put does: create the remote file with the usual 0644 (umask 022) and write the bytes."""
    path = Path(command.dest)
    path.write_bytes(command.src.getvalue())
    path.chmod(0o644)
    return path
