"""etcd for the fleet simulation's API server, built from the Go module proxy (no release download is reachable).

The etcd binary is the main package at the root of go.etcd.io/etcd/server/v3 (its main.go calls
etcdmain.Main; upstream's build.sh builds the same package). ETCD_VERSION is the newest v3.6 patch the
proxy served when this was written (`go list -m -versions go.etcd.io/etcd/server/v3`); the release line
Kubernetes v1.36 is tested against. Git SHA stays "Not provided": the module carries no commit to stamp.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalab.k8s.go_commands import GoCommand, command_binary

ETCD_VERSION = "v3.6.16"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD = GoCommand(binary="etcd", module=ETCD_MODULE, version=ETCD_VERSION, package=ETCD_MODULE,
                 version_text=f"etcd Version: {ETCD_VERSION.removeprefix('v')}")


def etcd_binary(cache_root: Path | None = None, **options: Any) -> Path:
    """The checked etcd binary, built and cached on first use (options: go_commands.command_binary's)."""
    return command_binary(ETCD, cache_root, **options)
