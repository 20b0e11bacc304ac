"""Whether each node's numa-align still vouches for its NodeResourceTopology object: its Lease.

numa-align writes its object only when it changes, so an old object may be right; its Lease
(kube-system/numa-align-<node>, numa_align.leases) is renewed while the object is known current. Pure: the
Leases are API-shaped dicts and `now` is given.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from numa_align.leases import NAMESPACE, lease_name


def parse_time(text: str) -> datetime.datetime | None:
    """A MicroTime or Time ("2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05Z"); None when unreadable."""
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None


def leases_by_name(leases: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str((lease.get("metadata") or {}).get("name")): lease for lease in leases}


def stale_since(node: str, leases: Mapping[str, Mapping[str, Any]], now: datetime.datetime) -> str | None:
    """None while the node's Lease is current; else why the object is stale: since the last renewal, or
    that there is no Lease (numa-align never ran here, is older than its Lease, or may not write it)."""
    lease = leases.get(lease_name(node))
    if lease is None:
        return f"numa-align stale: no Lease {NAMESPACE}/{lease_name(node)} (not running, or may not renew it)"
    spec = lease.get("spec") or {}
    renewed = parse_time(str(spec.get("renewTime") or spec.get("acquireTime") or ""))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        return f"numa-align stale: Lease {NAMESPACE}/{lease_name(node)} has no renewTime or duration"
    if now <= renewed + datetime.timedelta(seconds=duration):
        return None
    return f"numa-align stale since {renewed.strftime('%Y-%m-%dT%H:%M:%SZ')} (its Lease was not renewed " \
           f"for {int((now - renewed).total_seconds())} s; is numa-align running on {node}?)"
