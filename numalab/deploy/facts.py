"""Facts the cluster stages read from hosts before deciding what to change."""

from __future__ import annotations

import shlex
from typing import Any

from numa_align.cpulist import parse_cpulist
from numa_align.sysfs import NodeInfo
from pyinfra.api import FactBase

# One line per value, `nodeN key value...`: cpulist, distance row, MemTotal (kB), hugepages (size kB, count).
_DUMP = (
    "cd /sys/devices/system/node && for d in node[0-9]*; do "
    'echo "$d cpulist $(cat $d/cpulist)"; '
    'echo "$d distance $(cat $d/distance)"; '
    "echo \"$d memtotal $(sed -n 's/.*MemTotal: *\\([0-9]*\\) kB/\\1/p' $d/meminfo)\"; "
    'for h in $d/hugepages/hugepages-*kB; do [ -d "$h" ] && '
    'echo "$d hugepages ${h##*hugepages-} $(cat $h/nr_hugepages)"; done; '
    "done"
)


class NumaNodes(FactBase[list[NodeInfo]]):
    """The host's NUMA nodes from /sys/devices/system/node, as numa-align's reader gives them.

    .. code:: python

        [NodeInfo(id=0, cpus=frozenset({0, 1}), memory=2147483648, distances=(10, 20), hugepages={2048: 0})]
    """

    default = list

    def command(self) -> str:
        return _DUMP

    def process(self, output: list[str]) -> list[NodeInfo]:
        fields: dict[int, dict[str, Any]] = {}
        for line in output:
            words = line.split()
            if len(words) < 2 or not words[0].startswith("node"):
                continue
            node = fields.setdefault(int(words[0][4:]), {"hugepages": {}})
            key, values = words[1], words[2:]
            if key == "cpulist":
                node["cpus"] = parse_cpulist(" ".join(values)) if values else frozenset()
            elif key == "distance":
                node["distances"] = tuple(int(v) for v in values)
            elif key == "memtotal" and values:
                node["memory"] = int(values[0]) * 1024
            elif key == "hugepages" and len(values) == 2:
                node["hugepages"][int(values[0].removesuffix("kB"))] = int(values[1])
        return [
            NodeInfo(id=i, cpus=f.get("cpus", frozenset()), memory=f.get("memory", 0),
                     distances=f.get("distances", ()), hugepages=f["hugepages"])
            for i, f in sorted(fields.items())
        ]


class TextFile(FactBase[str]):
    """A small file's text ('' when absent): the kubelet's previous config for the policy-change reset, the
    RKE2 install marker."""

    default = str

    def command(self, path: str) -> str:
        return f"cat {shlex.quote(path)} 2>/dev/null || true"

    def process(self, output: list[str]) -> str:
        return "\n".join(output)
