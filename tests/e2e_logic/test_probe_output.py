"""The probe's output format: parsed from text, and from the real script run on this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from numa_align.cpulist import parse_cpulist

from numalab.placement.probe import ProbeOutputError, parse_probe_output, parse_status

PROBE = Path(__file__).resolve().parents[2] / "e2e" / "probe.sh"

PINNED_TO_1 = """\
numa-probe begin
Cpus_allowed_list:\t2-3
Mems_allowed_list:\t1
NUMA_NODE=1
node0 cpulist: 0-1
node1 cpulist: 2-3
numa-probe end
"""


def test_status_lines_are_parsed_by_key():
    text = "Name:\tsh\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0-1\nnot a field\n"
    status = parse_status(text)
    assert status["Cpus_allowed_list"] == "0-3,8"
    assert status["Mems_allowed_list"] == "0-1"
    assert status["Name"] == "sh"
    assert "not a field" not in status


def test_probe_block_gives_cpus_mems_node_and_node_cpus():
    report = parse_probe_output(PINNED_TO_1)
    assert report.cpus == {2, 3}
    assert report.mems == {1}
    assert report.numa_node == 1
    assert report.node_cpus == {0: {0, 1}, 1: {2, 3}}
    assert report.all_cpus == {0, 1, 2, 3}
    assert report.nodes_of_cpus() == {1}


def test_the_last_complete_block_wins_when_logs_repeat():
    first = PINNED_TO_1.replace("2-3\nMems", "0-3\nMems")
    cut_short = "numa-probe begin\nCpus_allowed_list:\t0\n"
    report = parse_probe_output("kubelet noise\n" + first + PINNED_TO_1 + cut_short)
    assert report.cpus == {2, 3}


def test_missing_numa_node_line_means_unset():
    report = parse_probe_output(PINNED_TO_1.replace("NUMA_NODE=1\n", ""))
    assert report.numa_node is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("numa-probe begin\nCpus_allowed_list:\t0\n", "did not finish"),
        ("Cpus_allowed_list:\t0\nnuma-probe end\n", "no 'numa-probe begin'"),
        (PINNED_TO_1.replace("Mems_allowed_list:\t1\n", ""), "no Mems_allowed_list line"),
        (PINNED_TO_1.replace("\t2-3", "\t3-2"), "Cpus_allowed_list: '3-2'"),
        (PINNED_TO_1.replace("NUMA_NODE=1", "NUMA_NODE=one"), "NUMA_NODE: 'one'"),
        (PINNED_TO_1.replace("node1 cpulist: 2-3", "node1 cpulist: x"), "node1 cpulist"),
        ("numa-probe begin\nCpus_allowed_list:\t0\nMems_allowed_list:\t0\nnuma-probe end\n",
         "no 'nodeN cpulist:'"),
    ],
)
def test_bad_probe_output_names_what_is_wrong(text, message):
    with pytest.raises(ProbeOutputError, match=message):
        parse_probe_output(text)


def _own(key: str) -> frozenset[int]:
    return parse_cpulist(parse_status(Path("/proc/self/status").read_text())[key])


def test_real_probe_script_reports_this_machine():
    env = {**os.environ, "NUMA_NODE": "0"}
    out = subprocess.run(["sh", str(PROBE)], env=env, capture_output=True, text=True, check=True).stdout
    report = parse_probe_output(out)
    assert report.cpus == _own("Cpus_allowed_list")
    assert report.mems == _own("Mems_allowed_list")
    assert report.numa_node == 0
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert report.node_cpus == {int(p.name[4:]): parse_cpulist((p / "cpulist").read_text()) for p in nodes}


def test_real_probe_script_without_numa_node_env_reports_unset():
    env = {k: v for k, v in os.environ.items() if k != "NUMA_NODE"}
    out = subprocess.run(["sh", str(PROBE)], env=env, capture_output=True, text=True, check=True).stdout
    assert parse_probe_output(out).numa_node is None
