"""The six binaries a fleet control plane runs, all from numa-lab's cache of Go builds (numalab.k8s).

kube-apiserver, kube-controller-manager and kube-scheduler come from the Kubernetes build the lab runs
(versions.KUBERNETES_VERSION), numa-scheduler from the same Kubernetes with NodeResourceTopologyMatch,
etcd and kwok from their modules (numalab.k8s.etcd, numalab.k8s.kwok). Resolving never builds unless asked:
a missing one is named with the command that builds them all (`python -m numalab.fleet.build`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from numalab.fleet.errors import FleetError
from numalab.k8s.binaries import GO_PREFIX, resolve_binaries
from numalab.k8s.cache import default_cache_root
from numalab.k8s.errors import BinariesError
from numalab.k8s.etcd import etcd_binary
from numalab.k8s.go_commands import BUILD_COMMAND
from numalab.k8s.kwok import kwok_binary
from numalab.k8s.scheduler import scheduler_binary
from numalab.k8s.versions import KUBERNETES_VERSION
from numalab.progress import Progress, Silent


@dataclass(frozen=True)
class FleetBinaries:
    """Where each program is; field names are the process names with '_' for '-'."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    numa_scheduler: Path
    kwok: Path

    def named(self) -> dict[str, Path]:
        """Process name (kube-apiserver, ...) -> path."""
        return {field.name.replace("_", "-"): Path(getattr(self, field.name)) for field in fields(self)}

    def problem(self) -> str | None:
        """The first binary that is absent or not executable, named with the command that builds it, or None."""
        for name, path in self.named().items():
            if not path.is_file():
                return f"the {name} binary {path} is missing; build it with `{BUILD_COMMAND}`"
            if not os.access(path, os.X_OK):
                return f"the {name} binary {path} is not executable (chmod +x it, or rebuild with `{BUILD_COMMAND}`)"
        return None


def fleet_binaries(
    cache_root: Path | None = None,
    *,
    build: bool = False,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
) -> FleetBinaries:
    """The cached binaries (checked against their sums); FleetError naming the first missing one unless build."""
    env = dict(os.environ if environ is None else environ)
    progress = progress or Silent()
    root = default_cache_root(env) if cache_root is None else cache_root
    try:
        kubernetes = resolve_binaries(f"{GO_PREFIX}{KUBERNETES_VERSION}", root, KUBERNETES_VERSION,
                                      progress=progress, environ=env, build=build)
        numa = scheduler_binary(root, kubernetes_version=KUBERNETES_VERSION, progress=progress, environ=env,
                                build=build)
        etcd = etcd_binary(root, progress=progress, environ=env, build=build)
        kwok = kwok_binary(root, progress=progress, environ=env, build=build)
    except BinariesError as exc:
        hint = "" if BUILD_COMMAND in str(exc) else f"; build them with `{BUILD_COMMAND}`"
        raise FleetError(f"{exc}{hint}") from None
    return FleetBinaries(etcd=etcd, kube_apiserver=kubernetes.path("kube-apiserver"),
                         kube_controller_manager=kubernetes.path("kube-controller-manager"),
                         kube_scheduler=kubernetes.path("kube-scheduler"), numa_scheduler=numa, kwok=kwok)
