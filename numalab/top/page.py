"""`numalab top --html`: one self-contained page, the SVG picture followed by the same data as a table.

No scripts, no external files: the page can be attached to an issue or opened from a CI artefact as is.
"""

from __future__ import annotations

from html import escape

from numalab.top.colours import picture_colours
from numalab.top.model import NodeView
from numalab.top.svg import render_svg
from numalab.top.text import HEADER, amount_text, devices_text, hold_text, hugepages_text

STYLE = """
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; margin: 0; background: #f1f5f9; color: #111827; }
main { padding: 0 20px 20px; max-width: 1160px; }
table { width: 100%; border-collapse: collapse; background: #ffffff; font-size: 13px; }
th, td { border: 1px solid #cbd5e1; padding: 4px 8px; text-align: left; vertical-align: top; }
td.pods { min-width: 240px; }
td.figures { white-space: nowrap; }
th { background: #e2e8f0; }
td.warning { color: #b91c1c; }
span.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border: 1px solid #64748b; }
"""


def render_html(views: list[NodeView], title: str = "numalab top") -> str:
    """The page: the picture (inline SVG), then one table row per cell and one per warning."""
    colours = picture_colours(views)
    rows = []
    for view in views:
        node = escape(view.name) + ("" if view.node_exists else " (stale)")
        policy = f"{view.policy or '?'} / {view.scope or '?'}" if view.has_nrt else "-"
        for cell in view.cells:
            pods = "<br>".join(
                f'<span class="swatch" style="background:{colours[h.pod]}"></span>{escape(h.pod)}: '
                f"{escape(hold_text(h.cpus, h.memory, dict(h.devices), h.spans))}" for h in cell.holds) or "-"
            cpus = "memory only" if cell.memory_only else amount_text(cell.cpu)
            figures = [cell.zone, cpus, amount_text(cell.memory, True), hugepages_text(cell), devices_text(cell)]
            rows.append(f'<tr><td>{node}</td><td class="figures">{escape(policy)}</td>'
                        + "".join(f'<td class="figures">{escape(text)}</td>' for text in figures)
                        + f'<td class="pods">{pods}</td></tr>')
        for warning in view.warnings:
            rows.append(f'<tr><td>{node}</td><td class="warning" colspan="7">{escape(warning)}</td></tr>')
    header = ["NODE", "TOPOLOGY MANAGER", *HEADER]
    table = ("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>"
             + "\n".join(rows) + "</tbody></table>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><main>\n{render_svg(views, title, False, colours)}\n"
            f"<h2>cells</h2>\n{table}\n</main></body></html>\n")
