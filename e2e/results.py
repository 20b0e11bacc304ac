"""The suite's result table: one row per worker x NUMA node x case, printed at the end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_NODES = "*"
VERDICTS = {True: "pass", False: "FAIL", None: "n/a"}


@dataclass(frozen=True)
class Row:
    worker: str
    node: str  # a NUMA node id, or ALL_NODES for checks of the whole worker
    case: str
    ok: bool | None  # None: the case does not apply to this worker x node (the detail says why)
    cpus: str = "-"
    mems: str = "-"
    detail: str = ""


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)

    def add(self, worker: str, node: int | str, case: str, ok: bool | None, cpus: str = "-", mems: str = "-",
            detail: str = "") -> Row:
        row = Row(worker, str(node), case, ok, cpus or "-", mems or "-", " ".join(detail.split()))
        self.rows.append(row)
        return row

    def failures(self, case_prefix: str) -> list[Row]:
        """Failed rows of a case ("multi" also matches "multi:app")."""
        return [row for row in self.rows if row.case.split(":")[0] == case_prefix and row.ok is False]

    def table(self) -> str:
        header = ("WORKER", "NUMA", "CASE", "RESULT", "CPUS", "MEMS", "DETAIL")
        ordered = sorted(self.rows, key=lambda r: (r.worker, r.node, r.case))
        lines = [header] + [
            (r.worker, r.node, r.case, VERDICTS[r.ok], r.cpus, r.mems, r.detail) for r in ordered
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
        return "\n".join(
            ("  ".join(cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]).rstrip()
            for line in lines
        )


def describe_failures(rows: list[Row]) -> str:
    return "\n".join(f"{r.worker} numa {r.node} {r.case}: {r.detail}" for r in rows)
