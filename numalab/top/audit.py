"""numa-align's cpuset audit of one node, as `numalab top` shows it: from the `numa-align/audit` annotation on
the node's NodeResourceTopology object (numa_align.audit says what each figure means and why it is there and
not in Prometheus only: top reads the API, not numa-align's /metrics).

Lenient like nrt.py: an annotation that is not the JSON expected is a warning and no audit line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numa_align.audit import ANNOTATION


@dataclass(frozen=True)
class AuditSummary:
    """readable False: numa-align could not read the node's cgroup tree (`why`); split and drift unknown."""

    readable: bool
    split: tuple[str, ...] = ()
    drift: tuple[str, ...] = ()
    cells: Mapping[int, int] = field(default_factory=dict)
    """Exclusive CPUs per NUMA node in the pinned containers' real cpusets."""
    stranded: int | None = None
    why: str = ""

    def text(self) -> str:
        """One line: "audit: 1 split (ns/pod/c), 0 drifted; exclusive CPUs node-0 3, node-1 0; stranded CPUs 2"."""
        stranded = "?" if self.stranded is None else str(self.stranded)
        if not self.readable:
            return f"audit: unknown ({self.why or 'no reason given'}); stranded CPUs {stranded}"
        parts = [f"{len(names)} {kind}" + (f" ({', '.join(names)})" if names else "")
                 for kind, names in (("split", self.split), ("drifted", self.drift))]
        cells = ", ".join(f"node-{node} {cpus}" for node, cpus in sorted(self.cells.items())) or "-"
        return f"audit: {', '.join(parts)}; exclusive CPUs in cpusets {cells}; stranded CPUs {stranded}"

    def as_dict(self) -> dict[str, Any]:
        return {"readable": self.readable, "split": list(self.split), "drift": list(self.drift),
                "cells": {str(node): cpus for node, cpus in sorted(self.cells.items())}, "stranded": self.stranded,
                "why": self.why or None}


def parse_audit(annotations: Mapping[str, Any], warnings: list[str]) -> AuditSummary | None:
    """The node's audit, None when numa-align published none (an older numa-align) or it cannot be read."""
    text = annotations.get(ANNOTATION)
    if text is None:
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError("not a JSON object")
        stranded = data.get("stranded")
        return AuditSummary(
            readable=data.get("readable") is True,
            split=tuple(str(name) for name in data.get("split") or []),
            drift=tuple(str(name) for name in data.get("drift") or []),
            cells={int(node): int(cpus) for node, cpus in (data.get("cells") or {}).items()},
            stranded=stranded if isinstance(stranded, int) and not isinstance(stranded, bool) else None,
            why=str(data.get("why") or ""))
    except (TypeError, ValueError, AttributeError) as exc:
        warnings.append(f"annotation {ANNOTATION} is not the audit expected ({exc}): audit not shown")
        return None
