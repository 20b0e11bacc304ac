"""Waiting for something a stage started, on the host, with a timeout and an error that says where to look.

Used only when the stage changed something or the controller found the thing not ready before the run,
so a second run with nothing to do waits for nothing and reports no change.
"""

from __future__ import annotations

import shlex
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from pyinfra.operations import server


def wait_until(name: str, check: str, timeout: int, unit: str, node: str, what: str, **op_args: object) -> None:
    """A shell loop on the host: `check` every 2 s until it succeeds or `timeout` seconds pass.

    `op_args` go to the operation (e.g. `_if=any_changed(...)`).
    """
    failure = (
        f"numa-lab: {what} on {node} not ready after {timeout} s; "
        f"see `journalctl -u {unit}` on {node} (last lines below)"
    )
    script = (
        f"deadline=$(( $(date +%s) + {timeout} )); "
        f"until {check}; do "
        f'if [ "$(date +%s)" -ge "$deadline" ]; then echo {shlex.quote(failure)} >&2; '
        f"journalctl -u {shlex.quote(unit)} --no-pager -n 15 >&2; exit 1; fi; "
        "sleep 2; done"
    )
    server.shell(name=name, commands=[script], **op_args)


def https_ok(url: str, ca_file: Path, timeout: float = 3.0) -> bool:
    """Does `url` answer 200 over TLS verified with `ca_file`? Asked from the controller; False when down."""
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False
