"""`python bench/fleet_scale.py` (`make scale`): the options, the checks before anything starts, the run, and
what it prints and writes.

    python bench/fleet_scale.py --sizes 100,1000 --strategies LeastAllocated,MostAllocated --out fleet-scale

Bad input is one line on stderr and exit 2, before any process starts: an invalid option, an unknown
strategy, a fleet spec naming an unknown shape, a missing binary, a port in use, a size whose memory estimate
exceeds the machine's. A failure while running is one line and exit 1; Ctrl-C exits 130. Either way the control
plane is torn down (numalab.fleet.controlplane) and nothing is left running.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from numalab.fleet import plotting, report
from numalab.fleet.binaries import fleet_binaries
from numalab.fleet.controlplane import port_names
from numalab.fleet.errors import FleetError
from numalab.fleet.filling import FillSettings
from numalab.fleet.measures import SideResult
from numalab.fleet.ports import assign_ports
from numalab.fleet.scale import ScaleSettings, check_sizes, run_size
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
    return p


def settings_from(args: argparse.Namespace) -> ScaleSettings:
    spec = load_spec(args.fleet) if args.fleet else fleet_spec(DEFAULT_FLEET)
    fill = FillSettings(rate=args.rate, rate_seconds=args.rate_seconds, settle=args.settle,
                        side_timeout=args.side_timeout, seed=args.seed)
    return ScaleSettings(sizes=args.sizes, strategies=args.strategies, fleet=spec, fill=fill, ports=dict(args.port))


def write(results: Sequence[SideResult], out: Path) -> list[Path]:
    """results.json, table.txt and the plots under `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    records = report.as_json(results)
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
        args.out.mkdir(parents=True, exist_ok=True)
    except (BadInput, FleetError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    progress = Progress(prefix=PROG)
    results: list[SideResult] = []
    try:
        for size in settings.sizes:
            results += run_size(size, binaries, settings, progress)
            print(f"{report.table(results)}\n", flush=True)
            written = write(results, args.out)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the control plane is stopped", file=sys.stderr)
        return 130
    except FleetError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(report.LEGEND)
    print(f"written under {args.out.resolve()}: {', '.join(path.name for path in written)}")
    return 0
