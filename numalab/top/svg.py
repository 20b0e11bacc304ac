"""`numalab top --svg`: the cluster drawn the way lstopo draws a machine, but for pods.

Each node is a box holding one box per NUMA cell; a cell shows one square per CPU (grey: not allocatable,
white: free, coloured: held by a pod, slate: held by a pod the node does not publish) and a memory bar in
the same colours; a legend maps pods to colours. Plain string generation: no dependency, every text escaped.
Pod colours: numalab.top.colours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from numalab.top.colours import ink_on, picture_colours, pod_colour
from numalab.top.model import CellView, NodeView
from numalab.top.text import amount_text, human_bytes

SQUARE, GAP, PAD = 24, 4, 12
CELL_MIN_WIDTH, NODE_MIN_WIDTH, CANVAS_WIDTH, MARGIN = 236, 360, 1160, 20
LINE = 16
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
STATE_FILL = {"reserved": "#cbd5e1", "free": "#ffffff", "unknown": "#64748b"}
STATE_LABEL = {"reserved": "not allocatable (reserved)", "free": "free", "unknown": "held, pod not published"}
WARN, INK, FAINT = "#b91c1c", "#111827", "#475569"


def text_width(text: str, size: int) -> int:
    """An estimate (no font metrics here): DejaVu Sans averages under 0.58 em per character."""
    return math.ceil(len(text) * size * 0.58)


def wrap(text: str, width: int, size: int) -> list[str]:
    """Words of `text` in lines that fit `width` pixels by the estimate above."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines or [""]


def _attrs(attrs: dict[str, object]) -> str:
    return " ".join(f'{name.rstrip("_").replace("_", "-")}="{escape(str(value))}"' for name, value in attrs.items())


def rect(x: float, y: float, w: float, h: float, tip: str | None = None, **attrs: object) -> str:
    """A <rect>; `tip` becomes its <title>, which browsers show on hover. class_ gives class, a_b gives a-b."""
    body = f"<title>{escape(tip)}</title>" if tip else ""
    return f'<rect {_attrs({"x": x, "y": y, "width": w, "height": h, **attrs})}>{body}</rect>'


def label(x: float, y: float, text: str, size: int = 12, **attrs: object) -> str:
    """A <text> with its content escaped; attributes as for rect."""
    return f'<text {_attrs({"x": x, "y": y, "font_size": size, "fill": INK, **attrs})}>{escape(text)}</text>'


@dataclass
class Box:
    """A laid-out piece of the picture: its size and its SVG elements, relative to its top-left corner."""

    width: int
    height: int
    parts: list[str]

    def at(self, x: int, y: int) -> str:
        return f'<g transform="translate({x},{y})">{"".join(self.parts)}</g>'


def cell_box(cell: CellView, colours: Mapping[str, str]) -> Box:
    """One cell: CPU squares (8 a row, 16 past 32 CPUs), its CPU line, memory bar, hugepages and devices."""
    squares = cell.squares()
    per_row = 8 if len(squares) <= 32 else 16
    title = f"NUMA {cell.numa_id}" if cell.zone == f"node-{cell.numa_id}" else cell.zone
    cpu, memory = cell.cpu, cell.memory
    if squares and cpu is not None:
        cpu_line = f"CPUs {cpu.capacity}, {cpu.allocatable} allocatable, {cpu.used} exclusive"
    else:
        cpu_line = "memory only: no CPUs" if cell.memory_only else "no CPUs listed"
    memory_line = "" if memory is None else (
        f"memory {human_bytes(memory.used)} used of {human_bytes(memory.allocatable)}"
        + (f" ({human_bytes(memory.capacity)} total)" if memory.capacity != memory.allocatable else ""))
    extras = [f"hugepages-{size}: {amount_text(a, True)}" for size, a in sorted(cell.hugepages.items())]
    extras += [f"{name}: {a.used} of {a.allocatable} used" for name, a in sorted(cell.devices.items())]
    widest = max(text_width(line, 11) for line in [cpu_line, memory_line, *extras])
    width = max(CELL_MIN_WIDTH, 2 * PAD + per_row * (SQUARE + GAP) - GAP, 2 * PAD + widest)
    inner = width - 2 * PAD
    parts, y = [label(PAD, 20, title, 13, font_weight="bold")], 30
    for i, square in enumerate(squares):
        x, top = PAD + (i % per_row) * (SQUARE + GAP), y + (i // per_row) * (SQUARE + GAP)
        fill = colours.get(square.pod, pod_colour(square.pod)) if square.pod else STATE_FILL[square.state]
        what = square.pod if square.pod else STATE_LABEL[square.state]
        tip = f"CPU {square.cpu}: {what}" if square.cpu is not None else what
        parts.append(rect(x, top, SQUARE, SQUARE, tip, class_=f"cpu {square.state}", fill=fill,
                          stroke="#94a3b8", rx=3))
        if square.cpu is not None:
            parts.append(label(x + SQUARE / 2, top + SQUARE / 2 + 4, str(square.cpu), 10, text_anchor="middle",
                               fill=ink_on(fill)))
    if squares:
        y += math.ceil(len(squares) / per_row) * (SQUARE + GAP) + LINE - 2
        parts.append(label(PAD, y, cpu_line, 11, fill=FAINT))
    else:
        y += LINE
        parts.append(label(PAD, y, cpu_line, 12, font_style="italic", fill=FAINT))
    if memory is not None:
        y += LINE + 2
        parts.append(label(PAD, y, memory_line, 11, fill=FAINT))
        y += 6
        x = float(PAD)
        for state, pod, size in cell.memory_segments():
            w = inner * size / memory.capacity if memory.capacity else 0
            tip = f"{pod or STATE_LABEL[state]}: {human_bytes(size)}"
            fill = colours.get(pod, pod_colour(pod)) if pod else STATE_FILL[state]
            parts.append(rect(round(x, 2), y, round(w, 2), 12, tip, class_=f"mem {state}", fill=fill))
            x += w
        parts.append(rect(PAD, y, inner, 12, None, class_="membar", fill="none", stroke="#94a3b8"))
        y += 12
    for extra in extras:
        y += LINE
        parts.append(label(PAD, y, extra, 11, fill=FAINT))
    height = y + PAD
    parts.insert(0, rect(0, 0, width, height, cell.zone, class_="cell", fill="#f8fafc", stroke="#64748b", rx=6))
    return Box(width, height, parts)


def node_box(view: NodeView, colours: Mapping[str, str]) -> Box:
    """One node: its name, policy, warnings, and its cells side by side, wrapping to stay within the canvas."""
    rows: list[list[Box]] = []
    for cell in (cell_box(cell, colours) for cell in view.cells):
        if rows and sum(c.width + 2 * GAP for c in rows[-1]) + cell.width <= CANVAS_WIDTH - 2 * MARGIN - 2 * PAD:
            rows[-1].append(cell)
        else:
            rows.append([cell])
    width = max([NODE_MIN_WIDTH, *(2 * PAD + sum(c.width for c in row) + GAP * 2 * (len(row) - 1) for row in rows)])
    title = view.name + ("  (stale: node gone)" if not view.node_exists else "")
    parts, y = [label(PAD, 24, title, 15, font_weight="bold")], 24
    if view.has_nrt:
        y += LINE + 2
        parts.append(label(PAD, y, f"topology manager {view.policy or '?'}, scope {view.scope or '?'}", 12,
                           fill=FAINT))
    for warning in view.warnings:
        for i, line in enumerate(wrap(warning, width - 2 * PAD - 14, 12)):
            y += LINE
            parts.append(label(PAD + (14 if i else 0), y, ("⚠ " if i == 0 else "") + line, 12, fill=WARN,
                               class_="warning"))
    y += PAD
    for row in rows:
        x = PAD
        for cell in row:
            parts.append(cell.at(x, y))
            x += cell.width + 2 * GAP
        y += max(cell.height for cell in row) + 2 * GAP
    height = y + PAD - (2 * GAP if rows else 0)
    dashed = {"stroke_dasharray": "6 4"} if not view.node_exists or not view.has_nrt else {}
    parts.insert(0, rect(0, 0, width, height, None, class_="node", fill="#ffffff", stroke="#334155",
                         stroke_width=1.5, rx=8, **dashed))
    return Box(width, height, parts)


def legend_box(views: list[NodeView], width: int, colours: Mapping[str, str]) -> Box:
    """The square states, then every pod with its node, phase and QoS class, flowing in lines of `width`."""
    entries = [(STATE_FILL[state], STATE_LABEL[state]) for state in ("reserved", "free", "unknown")]
    for view in views:
        for hold in view.pods:
            state = f"{hold.phase or '?'}, {hold.qos or '?'}" if hold.exists else "gone"
            entries.append((colours[hold.allocation.pod], f"{hold.allocation.pod}  ({view.name}, {state})"))
    parts, x, y = [label(0, 14, "legend", 13, font_weight="bold")], 0, 24
    for fill, text in entries:
        w = 22 + text_width(text, 12) + 24
        if x and x + w > width:
            x, y = 0, y + LINE + 6
        parts.append(rect(x, y, 14, 14, text, class_="swatch", fill=fill, stroke="#64748b"))
        parts.append(label(x + 20, y + 12, text, 12))
        x += w
    return Box(width, y + 20, parts)


def render_svg(views: list[NodeView], title: str = "numalab top", standalone: bool = True,
               colours: Mapping[str, str] | None = None) -> str:
    """The whole picture; standalone adds the XML declaration (leave it out to embed in HTML)."""
    colours = picture_colours(views) if colours is None else colours
    boxes = [node_box(view, colours) for view in views]
    placed, x, y, row_height, right = [], MARGIN, MARGIN + 30, 0, MARGIN
    for box in boxes:
        if x > MARGIN and x + box.width > CANVAS_WIDTH:
            x, y, row_height = MARGIN, y + row_height + 2 * PAD, 0
        placed.append(box.at(x, y))
        right = max(right, x + box.width)
        x, row_height = x + box.width + 2 * PAD, max(row_height, box.height)
    y += row_height + 2 * PAD
    width = max(right, CANVAS_WIDTH) + MARGIN
    legend = legend_box(views, width - 2 * MARGIN, colours)
    placed.append(legend.at(MARGIN, y))
    height = y + legend.height + MARGIN
    head = label(MARGIN, MARGIN + 14, title, 18, font_weight="bold")
    if not views:
        head += label(MARGIN, MARGIN + 40, "no nodes", 13, fill=FAINT)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="{escape(FONT)}">'
           f"<title>{escape(title)}</title>"
           + rect(0, 0, width, height, None, class_="background", fill="#f1f5f9") + head + "".join(placed) + "</svg>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n") if standalone else svg
