"""bench/fleet_scale.py's options and bad input (one line on stderr, exit 2, nothing started), Ctrl-C, and what
a run prints and writes, with the control plane's run replaced by canned results (no binaries)."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from numalab.fleet import cli
from numalab.fleet.measures import Packing, SideResult
from tests.fleet.test_controlplane import fake_binaries


@pytest.fixture(autouse=True)
def alone(monkeypatch):
    """No other fleet control plane on this machine, whatever runs beside these tests (test_others.py)."""
    monkeypatch.setattr(cli, "running_planes", lambda own: {})


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """main() with fake binaries and a run that must not start; returns (run it, the runs it asked for)."""
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    runs = []

    def run_side(size, side, found, settings, progress):
        runs.append((size, side, settings))
        raise AssertionError("a control plane would start")

    monkeypatch.setattr(cli, "run_side", run_side)
    return (lambda *argv: cli.main(["--out", str(tmp_path / "out"), *argv])), runs


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(("argv", "said"), [
    (["--rate", "0"], "argument --rate: expected a number > 0, got '0'"),
    (["--rate", "fast"], "argument --rate: expected a number > 0, got 'fast'"),
    (["--sizes", "100,lots"], "argument --sizes: expected node counts like 100,1000,5000, got '100,lots'"),
    (["--sizes", "0"], "argument --sizes: expected node counts >= 1, got '0'"),
    (["--strategies", "Fastest"], "argument --strategies: unknown strategy 'Fastest' in 'Fastest'"),
    (["--strategies", "MostAllocated,MostAllocated"], "a strategy named twice"),
    (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["--port", "apiserver"], "argument --port: expected NAME=PORT"),
    (["--port", "apiserver=6443"], "ports given for unknown components apiserver"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_invalid_options_are_one_line_and_exit_2(bench, capsys, argv, said):
    run, runs = bench
    assert run(*argv) == 2
    line = one_line(capsys)
    assert line.startswith("fleet_scale: ") and said in line
    assert runs == []


def test_a_fleet_spec_naming_an_unknown_shape(bench, capsys, tmp_path):
    run, runs = bench
    spec = tmp_path / "fleet.yaml"
    spec.write_text("nodes: 10\nshapes:\n  - {shape: 2cell-16, weight: 1}\n  - {shape: 8cell-huge, weight: 1}\n")
    assert run("--fleet", str(spec)) == 2
    assert one_line(capsys).startswith(f"fleet_scale: {spec}.shapes[1].shape: unknown shape '8cell-huge' (known: ")
    assert runs == []


def test_a_missing_binary_names_the_build_command(bench, capsys, tmp_path):
    run, runs = bench
    (tmp_path / "bin" / "kwok").unlink()
    assert run("--sizes", "10") == 2
    line = one_line(capsys)
    assert "the kwok binary" in line and "is missing; build it with `python -m numalab.fleet.build`" in line


def test_a_port_in_use_is_refused_before_anything_starts(bench, capsys):
    run, runs = bench
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run("--sizes", "10", "--port", f"kube-apiserver={port}") == 2
    assert one_line(capsys) == (f"fleet_scale: port {port} for kube-apiserver on 127.0.0.1 is in use; free it or "
                                "choose another port")
    assert runs == []


def test_a_size_above_the_machines_memory_gives_the_figures(bench, capsys):
    run, runs = bench
    assert run("--sizes", "100,1000000") == 2
    line = one_line(capsys)
    assert line.startswith("fleet_scale: 1000000 nodes and ") and "MiB for the control plane, more than 80% of " \
        "MemAvailable" in line
    assert runs == []  # refused before the first size ran


def result(side: str, nodes: int = 10, rejected: dict | None = None) -> SideResult:
    return SideResult(nodes=nodes, side=side, scheduler=f"s-{side}", full=True, offered=200, seen=230, bound=220,
                      admitted=150, rejected=rejected or {}, cannot_judge=0, unbound_at_full=5, fill_seconds=20.0,
                      rate_latency=(0.004, 0.2), burst_latency=(0.5, 3.0), throughput=41.5,
                      packing=Packing(90_000, 100_000, 12, 10, 3), nrt_writes=400, rss_peak=80 * 2**20,
                      rss_full=70 * 2**20, kubelet_lag=(0.05, 0.8))


def test_a_run_prints_the_table_and_writes_results_and_plots(tmp_path, monkeypatch, capsys):
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    asked = []

    def run_side(size, side, found, settings, progress):
        asked.append((size, side, settings.fill.rate, settings.fill.seed))
        return result(side, size, {"TopologyAffinityError": 30} if side == "default" else None)

    monkeypatch.setattr(cli, "run_side", run_side)
    out = tmp_path / "out"
    assert cli.main(["--sizes", "10,20", "--strategies", "LeastAllocated", "--rate", "5", "--seed", "4",
                     "--out", str(out)]) == 0
    assert asked == [(10, "default", 5.0, 4), (10, "LeastAllocated", 5.0, 4), (20, "default", 5.0, 4),
                     (20, "LeastAllocated", 5.0, 4)]
    printed = capsys.readouterr().out
    assert "nodes  side" in printed and f"written under {out.resolve()}" in printed
    rows = [line.split() for line in printed.splitlines() if line.startswith("20 ")]
    assert rows == [["20", "default", "41.5", "4", "200", "0.50", "3.00", "30", "30", "90.0%", "12", "20.0", "80",
                     "0.80", "yes"],
                    ["20", "LeastAllocated", "41.5", "4", "200", "0.50", "3.00", "0", "30", "90.0%", "12", "20.0",
                     "80", "0.80", "yes"]]
    records = json.loads((out / "results.json").read_text())
    assert [(r["nodes"], r["side"], r["rejections"]) for r in records] == [
        (10, "default", 30), (10, "LeastAllocated", 0), (20, "default", 30), (20, "LeastAllocated", 0)]
    for name in ("throughput", "rejections", "stranded", "nrt_writes", "rss"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "table.txt").read_text().startswith("nodes  side")


def test_ctrl_c_exits_130_with_one_line(tmp_path, monkeypatch, capsys):
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_side", interrupted)
    assert cli.main(["--sizes", "10", "--out", str(tmp_path / "out")]) == 130
    assert one_line(capsys) == "fleet_scale: interrupted; the control plane is stopped"


def test_sigterm_ends_the_run_as_ctrl_c_does(tmp_path, monkeypatch, capsys):
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)

    def terminated(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("SIGTERM did not end the run")

    monkeypatch.setattr(cli, "run_side", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["--sizes", "10", "--out", str(tmp_path / "out")]) == 130
    assert one_line(capsys) == "fleet_scale: interrupted; the control plane is stopped"
    assert signal.getsignal(signal.SIGTERM) is before


def test_each_side_is_written_as_it_ends_and_resume_runs_only_the_others(tmp_path, monkeypatch, capsys):
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    out, asked = tmp_path / "out", []

    def stopped_after_one(size, side, found, settings, progress):
        if asked:
            raise KeyboardInterrupt
        asked.append((size, side))
        return result(side, size, {"TopologyAffinityError": 7})

    monkeypatch.setattr(cli, "run_side", stopped_after_one)
    argv = ["--sizes", "10,20", "--strategies", "MostAllocated", "--seed", "4", "--out", str(out)]
    assert cli.main(argv) == 130
    records = json.loads((out / "results.json").read_text())
    assert [(r["nodes"], r["side"], r["rejections"]) for r in records] == [(10, "default", 7)]
    assert records[0]["run"]["fill"]["seed"] == 4
    capsys.readouterr()

    def run_side(size, side, found, settings, progress):
        asked.append((size, side))
        return result(side, size)

    monkeypatch.setattr(cli, "run_side", run_side)
    assert cli.main([*argv, "--resume"]) == 0
    assert asked == [(10, "default"), (10, "MostAllocated"), (20, "default"), (20, "MostAllocated")]
    records = json.loads((out / "results.json").read_text())
    assert [(r["nodes"], r["side"], r["rejections"]) for r in records] == [
        (10, "default", 7), (10, "MostAllocated", 0), (20, "default", 0), (20, "MostAllocated", 0)]
    assert "resumed from" in capsys.readouterr().err

    asked.clear()  # every side there: nothing runs, the table and plots are written again
    assert cli.main([*argv, "--resume"]) == 0 and asked == []
    assert (out / "table.txt").read_text().count("MostAllocated") == 2


def one_side_written(tmp_path, monkeypatch, capsys) -> Path:
    """--out after one default side of 10 nodes, seed 4; run_side then fails the test if called."""
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    out = tmp_path / "out"
    monkeypatch.setattr(cli, "run_side", lambda size, side, *rest: result(side, size))
    assert cli.main(["--sizes", "10", "--strategies", "none", "--seed", "4", "--out", str(out)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(cli, "run_side", lambda *args: pytest.fail("a side ran"))
    return out


def test_resume_keeps_sides_run_with_another_side_timeout(tmp_path, monkeypatch, capsys):
    """The timeout bounds a run, not what a side measures: 100 and 1,000 nodes ran with 3600 s, 5,000 with 10800."""
    out = one_side_written(tmp_path, monkeypatch, capsys)
    records = json.loads((out / "results.json").read_text())
    assert "side_timeout" not in records[0]["run"]["fill"] and records[0]["run"]["fill"]["seed"] == 4
    records[0]["run"]["fill"]["side_timeout"] = 3600.0  # as results.json held it before
    (out / "results.json").write_text(json.dumps(records))
    argv = ["--sizes", "10", "--strategies", "none", "--seed", "4", "--out", str(out), "--resume"]
    assert cli.main([*argv, "--side-timeout", "10800"]) == 0
    assert "resumed from" in capsys.readouterr().err


def test_resume_refuses_results_of_other_settings_or_unreadable(tmp_path, monkeypatch, capsys):
    out = one_side_written(tmp_path, monkeypatch, capsys)
    assert cli.main(["--sizes", "10", "--strategies", "none", "--seed", "5", "--out", str(out), "--resume"]) == 2
    assert one_line(capsys) == (f"fleet_scale: --resume: {out / 'results.json'} holds 10 nodes/default measured "
                                "with other settings (fill differ); use another --out or the same options")
    (out / "results.json").write_text("[{\"nodes\": 10}]")
    assert cli.main(["--sizes", "10", "--out", str(out), "--resume"]) == 2
    assert one_line(capsys).startswith(f"fleet_scale: --resume: {out / 'results.json'} cannot be read as the "
                                       "bench's results")


def test_without_default_runs_the_strategies_alone_and_resume_adds_the_default_later(tmp_path, monkeypatch, capsys):
    """A 5,000-node NUMA-aware side fills one sitting here: the default side can come in another, into one file."""
    binaries = fake_binaries(tmp_path / "bin")
    monkeypatch.setattr(cli, "fleet_binaries", lambda: binaries)
    out, asked = tmp_path / "out", []

    def run_side(size, side, found, settings, progress):
        asked.append((size, side))
        return result(side, size)

    monkeypatch.setattr(cli, "run_side", run_side)
    argv = ["--sizes", "10", "--strategies", "MostAllocated", "--seed", "4", "--out", str(out), "--resume"]
    assert cli.main([*argv, "--without-default"]) == 0
    assert asked == [(10, "MostAllocated")]
    assert cli.main(argv) == 0
    assert asked == [(10, "MostAllocated"), (10, "default")]
    records = json.loads((out / "results.json").read_text())
    assert sorted(r["side"] for r in records) == ["MostAllocated", "default"]


def test_without_default_and_no_strategy_is_refused(bench, capsys):
    run, runs = bench
    assert run("--strategies", "none", "--without-default") == 2
    assert one_line(capsys) == "fleet_scale: --without-default with --strategies none leaves no side to run"
    assert runs == []


def test_resume_refuses_sides_measured_with_the_deployments_beside_the_bare_pods(tmp_path, monkeypatch, capsys):
    """Results written before FillSettings.deployment_namespace had the Deployments in the bare pods' namespace:
    another measurement at 5,000 nodes (the controller-manager's cost), so not mixed in."""
    out = one_side_written(tmp_path, monkeypatch, capsys)
    records = json.loads((out / "results.json").read_text())
    assert records[0]["run"]["fill"]["deployment_namespace"] == "fleet-deployments"
    del records[0]["run"]["fill"]["deployment_namespace"]
    (out / "results.json").write_text(json.dumps(records))
    assert cli.main(["--sizes", "10", "--strategies", "none", "--seed", "4", "--out", str(out), "--resume"]) == 2
    assert "measured with other settings (fill differ)" in one_line(capsys)
