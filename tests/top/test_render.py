"""`numalab top`'s renderings: the table, the JSON document, the SVG picture and the HTML page."""

import json
import re
import xml.etree.ElementTree as ET

from numalab.top.colours import PALETTE, pod_colour, pod_colours
from numalab.top.model import build_views
from numalab.top.page import render_html
from numalab.top.svg import render_svg
from numalab.top.text import as_json, format_table, human_bytes
from tests.top.fakes import GI, nrt, pod, sample_cluster, zone

SVG = "{http://www.w3.org/2000/svg}"


def sample_views():
    return build_views(*sample_cluster())


def classes(element):
    return (element.get("class") or "").split()


def test_human_bytes():
    assert [human_bytes(v) for v in (0, 512, 2048, 8 * GI, 7301444403, 3 * 2**40)] == \
        ["0", "512", "2Ki", "8Gi", "6.8Gi", "3Ti"]


def test_table_shows_cells_pods_and_warnings():
    out = format_table(sample_views())
    lines = out.splitlines()
    assert "worker-1  topology manager: single-numa-node, scope pod" in lines
    row = next(line for line in lines if line.strip().startswith("node-0  4/3/3"))
    assert row.split() == ["node-0", "4/3/3", "8Gi/6.9Gi/3Gi", "2Mi", "512Mi/512Mi/0", "numa-0", "3/3/2",
                           "default/pinned-a:", "cpus", "1-2,", "mem", "2Gi,", "numa-0×1"]
    assert any(line.split()[:3] == ["node-3", "memory", "only"] for line in lines)
    assert "(1 CPU held by pods not listed)" in out
    assert "  warning: stale NodeResourceTopology worker-3: node worker-3 no longer exists" in lines
    assert any(line.startswith("  warning: no NodeResourceTopology: numa-align is not publishing here")
               for line in lines)


def test_json_structure():
    doc = json.loads(json.dumps(as_json(sample_views())))
    assert doc["version"] == 1
    assert [n["name"] for n in doc["nodes"]] == ["server", "worker-1", "worker-2", "worker-3"]
    server, worker1, worker2, worker3 = doc["nodes"]
    assert set(worker1) == {"name", "node_exists", "nrt", "topology_manager", "attributes",
                            "allocations_published", "cells", "pods", "warnings", "stale", "audit"}
    assert (server["nrt"], server["cells"], worker3["node_exists"]) == (False, [], False)
    assert worker1["topology_manager"] == {"policy": "single-numa-node", "scope": "pod"}
    cell0 = worker1["cells"][0]
    assert set(cell0) == {"zone", "numa_node", "memory_only", "cpu", "memory", "hugepages", "devices", "costs",
                          "pods", "unattributed"}
    assert cell0["cpu"] == {"capacity": 4, "allocatable": 3, "available": 0, "used": 3}
    assert cell0["hugepages"]["2Mi"]["capacity"] == 512 * 2**20
    assert cell0["pods"][0] == {"pod": "default/pinned-a", "cpus": [1, 2], "memory": 2 * GI,
                                "devices": {"numa-align/numa-0": 1}, "spans": []}
    assert worker1["pods"][0] == {"pod": "default/pinned-a", "exists": True, "phase": "Running",
                                  "qos": "Guaranteed", "cpus": "1-2", "numa_nodes": [0], "memory": {"0": 2 * GI},
                                  "devices": {"numa-align/numa-0": 1}}
    memory_only = worker2["cells"][2]
    assert (memory_only["zone"], memory_only["numa_node"], memory_only["memory_only"], memory_only["cpu"]) == \
        ("node-3", 3, True, None)
    assert worker2["cells"][1]["unattributed"] == {"cpus": 1, "memory": 0}


def test_svg_is_well_formed_with_one_rect_per_cpu():
    views = sample_views()
    root = ET.fromstring(render_svg(views).encode())
    assert root.tag == f"{SVG}svg"
    cpus = [r for r in root.iter(f"{SVG}rect") if "cpu" in classes(r)]
    assert len(cpus) == sum(c.cpu.capacity for v in views for c in v.cells if c.cpu) == 18
    held = [r for r in cpus if "held" in classes(r)]
    assert len(held) == 9 and sum("reserved" in classes(r) for r in cpus) == 2
    colours = pod_colours(["default/pinned-a", "default/pinned-b", "ml/trainer-7f9c", "prod/db-0",
                           "prod/cache-1", "default/old-job"])
    first = next(r for r in held if r.find(f"{SVG}title").text == "CPU 1: default/pinned-a")
    assert first.get("fill") == colours["default/pinned-a"]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {"1", "2", "3", "6", "7", "4", "5"} <= set(texts)
    assert "legend" in texts and any("prod/db-0" in (t or "") for t in texts)
    assert sum("node" in classes(r) for r in root.iter(f"{SVG}rect")) == 4


def test_svg_escapes_text():
    obj = nrt("w<1>", [zone(0, cpu=(2, 2, 1), memory=(GI, GI, GI))],
              allocations={'ns/<b>&"x\'': {"cpus": "1", "numa_nodes": [0]}})
    svg = render_svg(build_views([obj], [], [pod('ns/<b>&"x\'', "w<1>")]))
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    root = ET.fromstring(svg.encode())
    assert any(t.text == "w<1>  (stale: node gone)" for t in root.iter(f"{SVG}text"))


def test_html_embeds_the_svg_and_a_table():
    page = render_html(sample_views())
    assert page.startswith("<!DOCTYPE html>")
    svg = re.search(r"<svg .*?</svg>", page, re.S)
    assert svg is not None and "<?xml" not in page
    root = ET.fromstring(svg.group(0).encode())
    assert len([r for r in root.iter(f"{SVG}rect") if "cpu" in classes(r)]) == 18
    table = page[page.index("<table>"):]
    assert table.count("<tr>") == 1 + 6 + 3 and table.count('<td class="warning"') == 3
    assert "prod/cache-1: cpus 4-5, mem 2Gi, numa-2×2" in page


def test_pod_colours_are_stable_and_distinct_in_one_picture():
    assert pod_colour("default/pinned-a") == pod_colour("default/pinned-a")
    assert pod_colour("default/pinned-a") in {colour for _, colour in PALETTE}
    names = [f"ns/pod-{i}" for i in range(6)]
    colours = pod_colours(names)
    assert colours == pod_colours(reversed(names)) and len(set(colours.values())) == 6
    assert pod_colours(["ns/alone"]) == {"ns/alone": pod_colour("ns/alone")}
