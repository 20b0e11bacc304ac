"""`python bench/fleet_scale.py` (`make scale`): the options, the checks before anything starts, the run, and
what it prints and writes.

    python bench/fleet_scale.py --sizes 100,1000 --strategies LeastAllocated,MostAllocated --out fleet-scale

The results are written after every side, so a run stopped part way keeps what it measured, and `--resume`
runs only the sides --out's results.json does not hold yet for the same settings (a NUMA-aware side took 12-14
minutes at 1,000 nodes here, and its bind rate falls with size: a run of every size can span several sittings).

Bad input is one line on stderr and exit 2, before any process starts: an invalid option, an unknown
strategy, a fleet spec naming an unknown shape, a missing binary, a port in use, a size whose memory estimate
exceeds the machine's, a results.json to resume from that is unreadable or of other settings. A failure while
running is one line and exit 1; Ctrl-C or SIGTERM exits 130. Either way the control plane is torn down
(numalab.fleet.controlplane) and nothing is left running.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numalab.fleet import plotting, report
from numalab.fleet.binaries import fleet_binaries
from numalab.fleet.controlplane import port_names
from numalab.fleet.errors import FleetError
from numalab.fleet.filling import FillSettings
from numalab.fleet.measures import SideResult
from numalab.fleet.others import refusal, running_planes
from numalab.fleet.ports import assign_ports
from numalab.fleet.scale import ScaleSettings, check_sizes, run_side
from numalab.fleet.spec import DEFAULT_FLEET, fleet_spec, load_spec
from numalab.model.numa_scheduler import SCORING_STRATEGIES
from numalab.progress import Progress

PROG = "fleet_scale"
DEFAULT_OUT = Path("fleet-scale")


class BadInput(Exception):
    """An option the bench refuses; the message is the one line it prints."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's usage block and message: one line instead
        raise BadInput(message)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected node counts like 100,1000,5000, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected node counts >= 1, got {text!r}")
    return sizes


def _strategies(text: str) -> tuple[str, ...]:
    chosen = tuple(part for part in text.split(",") if part) if text != "none" else ()
    unknown = [s for s in chosen if s not in SCORING_STRATEGIES]
    if unknown or len(set(chosen)) != len(chosen):
        what = f"unknown strategy {unknown[0]!r}" if unknown else "a strategy named twice"
        raise argparse.ArgumentTypeError(f"{what} in {text!r}; expected some of {','.join(SCORING_STRATEGIES)} "
                                         "or none")
    return chosen


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _port(text: str) -> tuple[str, int]:
    name, _, port = text.partition("=")
    if not name or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=PORT (e.g. kube-apiserver=6443), got {text!r}")
    return name, int(port)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Fleet scale by simulation: the default scheduler and the NUMA-aware one's "
                "strategies, side by side on kwok nodes (issue 28).")
    p.add_argument("--sizes", type=_sizes, default=(100, 1000, 5000), help="node counts, comma-separated")
    p.add_argument("--strategies", type=_strategies, default=SCORING_STRATEGIES,
                   help=f"numa-scheduler scoring strategies after the default scheduler (default: all: "
                        f"{','.join(SCORING_STRATEGIES)}; none: the default scheduler only)")
    p.add_argument("--without-default", action="store_true",
                   help="leave out the default scheduler's side (with --resume: it ran, or will run, in another "
                        "sitting)")
    p.add_argument("--rate", type=_positive, default=FillSettings.rate, help="pods per second before the burst")
    p.add_argument("--rate-seconds", type=_positive, default=FillSettings.rate_seconds,
                   help="how long pods come at --rate (at most half the fleet's pods)")
    p.add_argument("--settle", type=_positive, default=FillSettings.settle,
                   help="seconds without an admission after which a fleet with a pod left over is full")
    p.add_argument("--side-timeout", type=_positive, default=FillSettings.side_timeout,
                   help="seconds a side may take to fill")
    p.add_argument("--seed", type=int, default=FillSettings.seed, help="the workload's seed (the same every side)")
    p.add_argument("--fleet", type=Path, help="a fleet spec (numalab.fleet.spec); its nodes are replaced by each "
                                              "size (default: the bench's mix of five shapes)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results.json, table.txt and the plots go")
    p.add_argument("--port", type=_port, action="append", default=[], metavar="NAME=PORT",
                   help="a fixed loopback port for a process (others are picked free)")
    p.add_argument("--resume", action="store_true",
                   help="keep the sides --out's results.json holds for these settings and run only the others")
    return p


def settings_from(args: argparse.Namespace) -> ScaleSettings:
    spec = load_spec(args.fleet) if args.fleet else fleet_spec(DEFAULT_FLEET)
    fill = FillSettings(rate=args.rate, rate_seconds=args.rate_seconds, settle=args.settle,
                        side_timeout=args.side_timeout, seed=args.seed)
    if args.without_default and not args.strategies:
        raise BadInput("--without-default with --strategies none leaves no side to run")
    return ScaleSettings(sizes=args.sizes, strategies=args.strategies, fleet=spec, fill=fill, ports=dict(args.port),
                         default_side=not args.without_default)


UNSHAPING = ("side_timeout",)
"""FillSettings that bound a run without shaping what a side measures: a side that ran out of time says so in
its own record (`full` false), so sides run with other timeouts compare (the 5,000-node sides need hours)."""


def run_settings(settings: ScaleSettings) -> dict[str, Any]:
    """What makes two runs' sides comparable: how they were filled (UNSHAPING left out), the fleet's shapes (a
    digest of the spec without its size) and the numa-schedulers' resync; kept with every record of
    results.json."""
    fleet = dataclasses.replace(settings.fleet, nodes=0)
    return comparable(json.loads(json.dumps({"fill": dataclasses.asdict(settings.fill),
                                             "fleet": hashlib.sha256(repr(fleet).encode()).hexdigest()[:16],
                                             "resync_seconds": settings.resync_seconds}, sort_keys=True, default=str)))


def comparable(run: Mapping[str, Any]) -> dict[str, Any]:
    """Run settings without UNSHAPING: run_settings' own, and a record's (records written before carry more)."""
    fill = {key: value for key, value in (run.get("fill") or {}).items() if key not in UNSHAPING}
    return {**run, "fill": fill}


def resumed(out: Path, settings: ScaleSettings) -> list[SideResult]:
    """The results of --out's results.json, kept for --resume; FleetError when it cannot be read or holds sides
    measured with other settings (mixing them would compare unlike runs)."""
    path = out / "results.json"
    if not path.exists():
        return []
    try:
        records = json.loads(path.read_text())
        ran = [comparable(record["run"]) for record in records]
        results = [report.from_json(record) for record in records]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FleetError(f"--resume: {path} cannot be read as the bench's results ({exc}); move it away") from None
    wanted = run_settings(settings)
    for record, theirs in zip(records, ran, strict=True):
        if theirs != wanted:
            differ = sorted(key for key in {**theirs, **wanted} if theirs.get(key) != wanted.get(key))
            raise FleetError(f"--resume: {path} holds {record['nodes']} nodes/{record['side']} measured with other "
                             f"settings ({', '.join(differ)} differ); use another --out or the same options")
    return results


def write(results: Sequence[SideResult], out: Path, settings: ScaleSettings) -> list[Path]:
    """results.json, table.txt and the plots under `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    records = [{**record, "run": run_settings(settings)} for record in report.as_json(results)]
    (out / "results.json").write_text(json.dumps(records, indent=1) + "\n")
    (out / "table.txt").write_text(f"{report.table(results)}\n\n{report.LEGEND}\n")
    return [out / "results.json", out / "table.txt", *plotting.draw(records, out)]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = parser().parse_args(argv)
        settings = settings_from(args)
        binaries = fleet_binaries()
        problem = binaries.problem()
        if problem:
            raise FleetError(problem)
        assign_ports(port_names(settings.strategies), settings.ports)
        check_sizes(settings)
        beside = refusal(running_planes(own=[os.getpid()]))
        if beside:
            raise FleetError(beside)
        args.out.mkdir(parents=True, exist_ok=True)
        results = resumed(args.out, settings) if args.resume else []
    except (BadInput, FleetError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    progress = Progress(prefix=PROG)
    done = {(result.nodes, result.side) for result in results}
    if done:
        progress.note(f"resumed from {args.out / 'results.json'}: {len(done)} side(s) kept")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    written: list[Path] | None = None
    try:
        for size in settings.sizes:
            for side in settings.sides:
                if (size, side) not in done:
                    results.append(run_side(size, side, binaries, settings, progress))
                    written = write(results, args.out, settings)
            print(f"{report.table(r for r in results if r.nodes == size)}\n", flush=True)
        if written is None:  # every side resumed: the table and plots are drawn from them alone
            written = write(results, args.out, settings)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the control plane is stopped", file=sys.stderr)
        return 130
    except FleetError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(report.LEGEND)
    print(f"written under {args.out.resolve()}: {', '.join(path.name for path in written)}")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a job's timeout, `kill`) ends the run as Ctrl-C does: the control plane is torn down."""
    raise KeyboardInterrupt
