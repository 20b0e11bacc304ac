"""kwok's controller (sigs.k8s.io/kwok/cmd/kwok) for the fleet simulation, built from the Go module proxy.

The controller alone: no kwokctl, no cluster it brings up. It keeps Nodes it manages Ready (their status
and Lease) and plays Stages on their pods; numalab.fleet gives it a configuration that leaves pods alone.
kwok stamps its version from pkg/consts (0.7.0 at the tag), so the build needs no -X flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalab.k8s.go_commands import GoCommand, command_binary

KWOK_VERSION = "v0.7.0"
KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK = GoCommand(binary="kwok", module=KWOK_MODULE, version=KWOK_VERSION, package=f"{KWOK_MODULE}/cmd/kwok",
                 version_text=f"kwok version {KWOK_VERSION}")


def kwok_binary(cache_root: Path | None = None, **options: Any) -> Path:
    """The checked kwok binary, built and cached on first use (options: go_commands.command_binary's)."""
    return command_binary(KWOK, cache_root, **options)
