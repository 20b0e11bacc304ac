"""numa-align's settings on a node: the user's `numa_align_settings` over the defaults, with the kubelet's
reserved CPUs as NUMA_RESERVED_CPUS, so that with NUMA_CAPACITY=cpus the plugin advertises only the CPUs
pods can get."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numa_align.cpulist import format_cpulist

from numalab.model.errors import ValidationError

DEFAULT_SETTINGS = {"NUMA_SOCKET_DIR": "/var/lib/kubelet/device-plugins"}
RESERVED = "NUMA_RESERVED_CPUS"


def plugin_settings(given: Mapping[str, Any] | None, reserved_cpus: frozenset[int]) -> dict[str, str]:
    """The plugin's NUMA_* environment; a NUMA_RESERVED_CPUS that disagrees with the kubelet is refused."""
    settings = {key: str(value) for key, value in (given or {}).items()}
    bad = [key for key in settings if not key.startswith("NUMA_")]
    if bad:
        raise ValidationError(f"numa_align_settings.{bad[0]}", "the plugin's settings are NUMA_* variables")
    reserved = format_cpulist(reserved_cpus)
    if settings.get(RESERVED, reserved) != reserved:
        raise ValidationError(f"numa_align_settings.{RESERVED}",
                              f"{settings[RESERVED]!r} but the kubelet reserves {reserved or 'no CPU'} "
                              "(reserved-cpus); leave it out, numa-lab sets it from the kubelet policy")
    if reserved:
        settings[RESERVED] = reserved
    return {**DEFAULT_SETTINGS, **settings}
