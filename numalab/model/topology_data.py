"""The inventory form of a Topology, read and validated, and written back.

    numa:
      threads_per_core: 2          # or cores: ["0,4", "1,5", ...] (online threads per core)
      cells:
        - {id: 0, cpus: 0-7, offline_cpus: "7", memory: 8Gi, hugepages: {2Mi: 512}}
        - {id: 2, memory: 16Gi}    # memory-only: no cpus (CXL, HBM, GPU memory)
        - {id: 3, memory: 0}       # nothing to offer: CXL memory taken offline
      distances: [[10, 20, 20, 20], [20, 10, 20, 20], [20, 20, 10, 20], [20, 20, 20, 10]]

`cpus` is the cell's cpulist as sysfs writes it (offline CPUs included); `offline_cpus` names those that
are offline. `threads_per_core` groups consecutive ids into cores, as QEMU numbers threads. Hugepage sizes
are any the kernel has, named as the kubelet names them (cell.page_name). Each distance row is kept as given:
ACPI's SLIT allows d(i,j) != d(j,i). Every error names the field under `where`.

Only the parts of a Topology are built here (parse_topology), so this module and topology do not import each
other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from numa_align.cpulist import CpulistError, format_cpulist, parse_cpulist

from numalab.model.cell import Cell, page_bytes, page_name
from numalab.model.errors import ValidationError
from numalab.model.quantity import format_bytes, parse_bytes

if TYPE_CHECKING:
    from numalab.model.topology import Topology

LOCAL_DISTANCE = 10
"""A node's distance to itself: ACPI's SLIT normalises it to 10, and remote distances are above it."""
REMOTE_DISTANCE = 20
MAX_NODE_ID = 1023
"""The kernel's node ids stop below MAX_NUMNODES (1024 with NODES_SHIFT 10)."""
MAX_THREADS_PER_CORE = 8
_CELL_KEYS = {"id", "cpus", "offline_cpus", "memory", "hugepages"}
_TOP_KEYS = {"cells", "distances", "threads_per_core", "cores", "packages"}


class TopologyParts(NamedTuple):
    """What Topology takes, in its field order: cells in id order, distance rows, cores, packages."""

    cells: tuple[Cell, ...]
    distances: dict[int, dict[int, int]] | None
    cores: dict[int, frozenset[int]] | None
    packages: dict[int, int] | None


def parse_topology(data: Mapping[str, Any], where: str = "numa") -> TopologyParts:
    if not isinstance(data, Mapping):
        raise ValidationError(where, f"expected a mapping with 'cells', got {type(data).__name__}")
    _no_unknown(data, _TOP_KEYS, where)
    raw_cells = data.get("cells")
    if not isinstance(raw_cells, Sequence) or isinstance(raw_cells, str) or not raw_cells:
        raise ValidationError(f"{where}.cells", "expected a non-empty list of cells")
    cells = [_cell(raw, f"{where}.cells[{i}]") for i, raw in enumerate(raw_cells)]
    _check_cells(cells, where)
    cells.sort(key=lambda cell: cell.id)
    distances = data.get("distances")
    matrix = None if distances is None else _distances(distances, cells, f"{where}.distances")
    cores = _cores(data, cells, where)
    packages = _packages(data.get("packages"), cells, f"{where}.packages")
    return TopologyParts(tuple(cells), matrix, cores, packages)


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    out: dict[str, Any] = {}
    threads = topology.threads_per_core
    if topology.cores is not None and threads > 1:
        if topology.cores == _consecutive_cores(topology.cells, threads):
            out["threads_per_core"] = threads
        else:
            out["cores"] = [format_cpulist(core) for core in topology.core_list]
    out["cells"] = []
    for cell in topology.cells:
        entry: dict[str, Any] = {"id": cell.id}
        if cell.cpus or cell.offline_cpus:
            entry["cpus"] = format_cpulist(cell.cpus | cell.offline_cpus)
        if cell.offline_cpus:
            entry["offline_cpus"] = format_cpulist(cell.offline_cpus)
        entry["memory"] = format_bytes(cell.memory)
        if any(cell.hugepages.values()):
            entry["hugepages"] = dict(cell.hugepages)
        out["cells"].append(entry)
    if topology.distances is not None:
        out["distances"] = {a: dict(row) for a, row in topology.distances.items()}
    if topology.packages is not None:
        by_package: dict[int, set[int]] = {}
        for cpu, package in topology.packages.items():
            by_package.setdefault(package, set()).add(cpu)
        out["packages"] = {package: format_cpulist(cpus) for package, cpus in sorted(by_package.items())}
    return out


def _no_unknown(raw: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = set(raw) - known
    if unknown:
        raise ValidationError(where, f"unknown key(s) {', '.join(sorted(map(str, unknown)))}")


def _cpuset(raw: Any, where: str) -> frozenset[int]:
    try:
        if raw is None:
            return frozenset()
        if isinstance(raw, int) and not isinstance(raw, bool):
            return frozenset({raw})
        if isinstance(raw, str):
            return parse_cpulist(raw)
        if isinstance(raw, Sequence) and all(isinstance(c, int) and not isinstance(c, bool) for c in raw):
            return frozenset(raw)
        raise CpulistError(f"expected a cpulist like '0-3,8-11', got {raw!r}")
    except CpulistError as exc:
        raise ValidationError(where, str(exc)) from None


def _cell(raw: Any, where: str) -> Cell:
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping with id, cpus, memory, got {raw!r}")
    _no_unknown(raw, _CELL_KEYS, where)
    for key in ("id", "memory"):
        if key not in raw:
            raise ValidationError(f"{where}.{key}", "is required")
    cell_id = raw["id"]
    if isinstance(cell_id, bool) or not isinstance(cell_id, int) or not 0 <= cell_id <= MAX_NODE_ID:
        raise ValidationError(f"{where}.id", f"expected a node id from 0 to {MAX_NODE_ID}, got {cell_id!r}")
    listed = _cpuset(raw.get("cpus"), f"{where}.cpus")
    offline = _cpuset(raw.get("offline_cpus"), f"{where}.offline_cpus")
    if offline - listed:
        raise ValidationError(f"{where}.offline_cpus",
                              f"cpu(s) {format_cpulist(offline - listed)} are not in cell {cell_id}'s cpus")
    memory = parse_bytes(raw["memory"], f"{where}.memory")
    if memory < 0:
        raise ValidationError(f"{where}.memory", f"cell {cell_id} needs memory ≥ 0, got {raw['memory']!r}")
    # A cell with neither cpus nor memory is kept: the kernel keeps the node online (CXL memory taken offline
    # leaves MemTotal 0 kB) and the kubelet's machine info lists it, with 0 memory in the Memory Manager.
    hugepages = _hugepages(raw.get("hugepages") or {}, f"{where}.hugepages")
    pages = sum(count * page_bytes(size, where) for size, count in hugepages.items())
    if pages > memory:
        raise ValidationError(
            f"{where}.hugepages",
            f"{format_bytes(pages)} of hugepages exceed the cell's memory {format_bytes(memory)}",
        )
    return Cell(cell_id, listed - offline, memory, hugepages, offline)


def _hugepages(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping like {{2Mi: 512}}, got {raw!r}")
    pages: dict[str, int] = {}
    for size, count in raw.items():
        name = page_name(size, f"{where}.{size}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(f"{where}.{size}", f"expected a page count ≥ 0, got {count!r}")
        if name in pages:
            raise ValidationError(f"{where}.{size}", f"the page size {name} is given twice")
        pages[name] = count
    return pages


def _check_cells(cells: list[Cell], where: str) -> None:
    seen_ids: dict[int, int] = {}
    seen_cpus: dict[int, int] = {}
    for i, cell in enumerate(cells):
        if cell.id in seen_ids:
            raise ValidationError(f"{where}.cells[{i}].id", f"node id {cell.id} is used twice")
        seen_ids[cell.id] = i
        for cpu in sorted(cell.cpus | cell.offline_cpus):
            if cpu in seen_cpus:
                other = cells[seen_cpus[cpu]].id
                raise ValidationError(
                    f"{where}.cells[{i}].cpus", f"cpu {cpu} of cell {cell.id} is also in cell {other}"
                )
            seen_cpus[cpu] = i
    if not any(cell.cpus for cell in cells):
        raise ValidationError(f"{where}.cells", "no cell has an online cpu")


def _consecutive_cores(cells: Sequence[Cell], threads: int) -> dict[int, frozenset[int]]:
    """Runs of `threads` consecutive ids over every CPU (offline ones hold their place), online part kept."""
    listed = sorted(frozenset().union(*(cell.cpus | cell.offline_cpus for cell in cells)))
    online = frozenset().union(*(cell.cpus for cell in cells))
    cores: dict[int, frozenset[int]] = {}
    for start in range(0, len(listed), threads):
        core = frozenset(listed[start:start + threads]) & online
        cores.update(dict.fromkeys(core, core))
    return cores


def _cores(data: Mapping[str, Any], cells: Sequence[Cell], where: str) -> dict[int, frozenset[int]] | None:
    if "threads_per_core" in data and "cores" in data:
        raise ValidationError(where, "give threads_per_core or cores, not both")
    online = frozenset().union(*(cell.cpus for cell in cells))
    if "threads_per_core" in data:
        threads = data["threads_per_core"]
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS_PER_CORE:
            raise ValidationError(f"{where}.threads_per_core",
                                  f"expected 1 to {MAX_THREADS_PER_CORE} threads per core, got {threads!r}")
        cores = _consecutive_cores(cells, threads)
    elif "cores" in data:
        raw = data["cores"]
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise ValidationError(f"{where}.cores", f"expected a list of cpulists (one per core), got {raw!r}")
        cores = {}
        for i, entry in enumerate(raw):
            core = _cpuset(entry, f"{where}.cores[{i}]")
            if not core or core - online:
                raise ValidationError(f"{where}.cores[{i}]", f"{format_cpulist(core - online) or 'an empty core'}"
                                      " is not an online cpu of the cells")
            for cpu in core:
                if cpu in cores:
                    raise ValidationError(f"{where}.cores[{i}]", f"cpu {cpu} is in two cores")
                cores[cpu] = core
        if online - cores.keys():
            raise ValidationError(f"{where}.cores", f"cpu(s) {format_cpulist(online - cores.keys())} are in no core")
    else:
        return None
    for cell in cells:
        for cpu in sorted(cell.cpus):
            if not cores[cpu] <= cell.cpus:
                raise ValidationError(f"{where}.cores", f"the core of cpu {cpu} ({format_cpulist(cores[cpu])}) spans "
                                      f"cells; its threads must all be in cell {cell.id}")
    return dict(sorted(cores.items()))


def _packages(raw: Any, cells: Sequence[Cell], where: str) -> dict[int, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValidationError(where, f"expected a mapping of package id to cpulist, got {raw!r}")
    online = frozenset().union(*(cell.cpus for cell in cells))
    packages: dict[int, int] = {}
    for package, cpulist in raw.items():
        for cpu in _cpuset(cpulist, f"{where}.{package}"):
            if cpu not in online or cpu in packages:
                raise ValidationError(f"{where}.{package}", f"cpu {cpu} is not online or is in two packages")
            packages[cpu] = int(package)
    if online - packages.keys():
        raise ValidationError(where, f"cpu(s) {format_cpulist(online - packages.keys())} are in no package")
    return dict(sorted(packages.items()))


def _distances(raw: Any, cells: Sequence[Cell], where: str) -> dict[int, dict[int, int]]:
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
        matrix[key] = {}
        for col, value in row.items():
            if col not in ids:
                raise ValidationError(f"{row_where}.{col}", f"unknown node id {col!r}")
            if isinstance(value, bool) or not isinstance(value, int) or not 10 <= value <= 254:
                raise ValidationError(f"{row_where}.{col}", f"expected a distance from 10 to 254, got {value!r}")
            matrix[key][col] = value
    for a in ids:
        if a not in matrix:
            raise ValidationError(f"{where}.{a}", f"row for node {a} is missing")
        for b in ids:
            if b not in matrix[a]:
                raise ValidationError(f"{where}.{a}.{b}", "distance is missing")
    # ACPI's SLIT rules, as the kernel checks them (a table breaking them is ignored): 10 on the diagonal, more
    # than 10 elsewhere. It does not ask for d(a,b) == d(b,a), so an asymmetric table is kept row by row.
    for a in ids:
        if matrix[a][a] != LOCAL_DISTANCE:
            raise ValidationError(f"{where}.{a}.{a}", f"the diagonal must be 10, got {matrix[a][a]}")
        for b in ids:
            if b != a and matrix[a][b] <= LOCAL_DISTANCE:
                raise ValidationError(f"{where}.{a}.{b}", f"a remote distance must exceed 10, got {matrix[a][b]}")
    return {a: matrix[a] for a in ids}
