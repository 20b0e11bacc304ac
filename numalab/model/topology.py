"""NUMA topology: cells with cpus, memory, hugepages, and the distance matrix.

Built from inventory data (`Topology.from_dict`) or from sysfs (numalab.sysfs). Validation happens once,
here, so every later stage (kubelet policy, domain XML, lint) can trust the shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist

from numalab.model.errors import ValidationError
from numalab.model.quantity import format_bytes, hugepage_size, parse_bytes

LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20


@dataclass(frozen=True)
class Cell:
    """One NUMA node. memory in bytes; hugepages maps a page size ("2Mi", "1Gi") to a page count."""

    id: int
    cpus: frozenset[int]
    memory: int
    hugepages: Mapping[str, int] = field(default_factory=dict)

    @property
    def cpulist(self) -> str:
        return format_cpulist(self.cpus)

    def hugepage_bytes(self, size: str) -> int:
        return self.hugepages.get(size, 0) * hugepage_size(size, "hugepages")


@dataclass(frozen=True)
class Topology:
    """A host's NUMA shape. `distances` is None when the defaults (10 local, 20 remote) apply."""

    cells: tuple[Cell, ...]
    distances: Mapping[int, Mapping[int, int]] | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(cell.id for cell in self.cells)

    @property
    def cpus(self) -> frozenset[int]:
        return frozenset().union(*(cell.cpus for cell in self.cells))

    @property
    def memory(self) -> int:
        return sum(cell.memory for cell in self.cells)

    def cell(self, cell_id: int) -> Cell:
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(f"no NUMA cell {cell_id} (cells: {format_cpulist(self.ids)})")

    def cell_of_cpu(self, cpu: int) -> Cell:
        for cell in self.cells:
            if cpu in cell.cpus:
                return cell
        raise KeyError(f"cpu {cpu} is in no NUMA cell")

    def distance(self, a: int, b: int) -> int:
        if self.distances is not None:
            return self.distances[a][b]
        self.cell(a), self.cell(b)
        return LOCAL_DISTANCE if a == b else REMOTE_DISTANCE

    @property
    def has_default_distances(self) -> bool:
        return all(
            self.distance(a, b) == (LOCAL_DISTANCE if a == b else REMOTE_DISTANCE) for a in self.ids for b in self.ids
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "numa") -> Topology:
        """Build and validate; every error names the field under `where` (e.g. numa.cells[1].cpus)."""
        if not isinstance(data, Mapping):
            raise ValidationError(where, f"expected a mapping with 'cells', got {type(data).__name__}")
        unknown = set(data) - {"cells", "distances"}
        if unknown:
            raise ValidationError(where, f"unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        raw_cells = data.get("cells")
        if not isinstance(raw_cells, Sequence) or isinstance(raw_cells, str) or not raw_cells:
            raise ValidationError(f"{where}.cells", "expected a non-empty list of cells")
        cells = [_cell_from_dict(raw, f"{where}.cells[{i}]") for i, raw in enumerate(raw_cells)]
        _check_cells(cells, where)
        order = sorted(range(len(cells)), key=lambda i: cells[i].id)
        sorted_cells = tuple(cells[i] for i in order)
        distances = data.get("distances")
        matrix = None if distances is None else _distances(distances, sorted_cells, f"{where}.distances")
        return cls(sorted_cells, matrix)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cells": []}
        for cell in self.cells:
            entry: dict[str, Any] = {"id": cell.id, "cpus": cell.cpulist, "memory": format_bytes(cell.memory)}
            if any(cell.hugepages.values()):
                entry["hugepages"] = dict(cell.hugepages)
            out["cells"].append(entry)
        if self.distances is not None:
            out["distances"] = {a: dict(row) for a, row in self.distances.items()}
        return out


def _cell_from_dict(raw: Any, where: str) -> Cell:
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping with id, cpus, memory, got {raw!r}")
    unknown = set(raw) - {"id", "cpus", "memory", "hugepages"}
    if unknown:
        raise ValidationError(where, f"unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    for key in ("id", "cpus", "memory"):
        if key not in raw:
            raise ValidationError(f"{where}.{key}", "is required")
    cell_id = raw["id"]
    if isinstance(cell_id, bool) or not isinstance(cell_id, int) or cell_id < 0:
        raise ValidationError(f"{where}.id", f"expected a node id ≥ 0, got {cell_id!r}")
    cpus_raw = raw["cpus"]
    try:
        if isinstance(cpus_raw, int) and not isinstance(cpus_raw, bool):
            cpus = frozenset({cpus_raw})
        elif isinstance(cpus_raw, str):
            cpus = parse_cpulist(cpus_raw)
        elif isinstance(cpus_raw, Sequence) and all(isinstance(c, int) for c in cpus_raw):
            cpus = frozenset(cpus_raw)
        else:
            raise CpulistError(f"expected a cpulist like '0-3,8-11', got {cpus_raw!r}")
    except CpulistError as exc:
        raise ValidationError(f"{where}.cpus", str(exc)) from None
    if not cpus:
        raise ValidationError(f"{where}.cpus", f"cell {cell_id} has no cpus (an empty cell)")
    memory = parse_bytes(raw["memory"], f"{where}.memory")
    if memory <= 0:
        raise ValidationError(f"{where}.memory", f"cell {cell_id} needs memory > 0, got {raw['memory']!r}")
    hugepages: dict[str, int] = {}
    raw_pages = raw.get("hugepages") or {}
    if not isinstance(raw_pages, Mapping):
        raise ValidationError(f"{where}.hugepages", f"expected a mapping like {{2Mi: 512}}, got {raw_pages!r}")
    for size, count in raw_pages.items():
        size_name = str(size).removeprefix("hugepages-")
        hugepage_size(size_name, f"{where}.hugepages.{size}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(f"{where}.hugepages.{size}", f"expected a page count ≥ 0, got {count!r}")
        hugepages[size_name] = count
    page_bytes = sum(count * hugepage_size(size, where) for size, count in hugepages.items())
    if page_bytes > memory:
        raise ValidationError(
            f"{where}.hugepages",
            f"{format_bytes(page_bytes)} of hugepages exceed the cell's memory {format_bytes(memory)}",
        )
    return Cell(cell_id, cpus, memory, hugepages)


def _check_cells(cells: list[Cell], where: str) -> None:
    seen_ids: dict[int, int] = {}
    seen_cpus: dict[int, int] = {}
    for i, cell in enumerate(cells):
        if cell.id in seen_ids:
            raise ValidationError(f"{where}.cells[{i}].id", f"node id {cell.id} is used twice")
        seen_ids[cell.id] = i
        for cpu in sorted(cell.cpus):
            if cpu in seen_cpus:
                other = cells[seen_cpus[cpu]].id
                raise ValidationError(
                    f"{where}.cells[{i}].cpus", f"cpu {cpu} of cell {cell.id} is also in cell {other}"
                )
            seen_cpus[cpu] = i


def _distances(raw: Any, cells: tuple[Cell, ...], where: str) -> dict[int, dict[int, int]]:
    ids = [cell.id for cell in cells]
    if isinstance(raw, Sequence) and not isinstance(raw, str):
        if len(raw) != len(ids):
            raise ValidationError(where, f"expected {len(ids)} rows (one per cell, in id order), got {len(raw)}")
        raw = dict(zip(ids, raw, strict=True))
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping of node id to row, got {raw!r}")
    matrix: dict[int, dict[int, int]] = {}
    for key, row in raw.items():
        row_where = f"{where}.{key}"
        if key not in ids:
            raise ValidationError(row_where, f"unknown node id {key!r} (cells: {format_cpulist(ids)})")
        if isinstance(row, Sequence) and not isinstance(row, str):
            if len(row) != len(ids):
                raise ValidationError(row_where, f"expected {len(ids)} distances, got {len(row)}")
            row = dict(zip(ids, row, strict=True))
        if not isinstance(row, Mapping):
            raise ValidationError(row_where, f"expected a row (list or mapping), got {row!r}")
        for col in row:
            if col not in ids:
                raise ValidationError(f"{row_where}.{col}", f"unknown node id {col!r}")
        matrix[key] = {}
        for col, value in row.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 10 <= value <= 254:
                raise ValidationError(f"{row_where}.{col}", f"expected a distance from 10 to 254, got {value!r}")
            matrix[key][col] = value
    for a in ids:
        if a not in matrix:
            raise ValidationError(f"{where}.{a}", f"row for node {a} is missing")
        for b in ids:
            if b not in matrix[a]:
                raise ValidationError(f"{where}.{a}.{b}", "distance is missing")
    for a in ids:
        if matrix[a][a] != LOCAL_DISTANCE:
            raise ValidationError(f"{where}.{a}.{a}", f"the diagonal must be 10, got {matrix[a][a]}")
        for b in ids:
            if b != a and matrix[a][b] != matrix[b][a]:
                raise ValidationError(
                    f"{where}.{a}.{b}", f"asymmetric: {a}->{b} is {matrix[a][b]} but {b}->{a} is {matrix[b][a]}"
                )
            if b != a and matrix[a][b] <= LOCAL_DISTANCE:
                raise ValidationError(f"{where}.{a}.{b}", f"a remote distance must exceed 10, got {matrix[a][b]}")
    return matrix
