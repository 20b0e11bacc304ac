"""Benchmark: the default scheduler and the NUMA-aware one on the same pods, in one run against a live cluster
(the lab's, by default); prints each side's rejections and time until every pod was decided, and their ratio
(nothing asserted).

It runs e2e case 9 (e2e/test_9_numa_scheduler.py: pressure splits each worker's free CPUs between its
cells, then Guaranteed pods that fit only in some cells) through the e2e suite and reads its table rows.
Without a reachable cluster it says so and exits 0: the figure needs the lab (`make lab`).
Usage: python bench/numa_scheduler_bench.py [--kubeconfig PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB_STATE = Path.home() / ".local" / "share" / "numa-lab" / os.environ.get("NUMALAB_NAME", "numa-lab")
ROW = re.compile(r"numa-scheduler:(\S+)\s+\S+\s+\S+\s+\S+\s+(.*)$")
DEPLOYMENT = re.compile(r"numa-scheduler:deployment\s+(\S+)\s+\S+\s+\S+\s+.*(Deployment of \d+: .*)$")
FIGURES = re.compile(r"(\d+) running, (\d+) rejected \(TopologyAffinityError\), (\d+) pending, "
                     r"all decided in (\d+) s")


def figures(output: str) -> dict[str, tuple[int, int, int, int]]:
    """scheduler -> (running, rejected, pending, seconds) from the e2e table's numa-scheduler rows."""
    found = {}
    for line in output.splitlines():
        row = ROW.search(line)
        numbers = FIGURES.search(row.group(2)) if row else None
        if row and numbers:
            found[row.group(1)] = tuple(int(n) for n in numbers.groups())
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path,
                        default=Path(os.environ.get("KUBECONFIG") or LAB_STATE / "kubeconfig"))
    args = parser.parse_args()
    if not args.kubeconfig.is_file():
        print(f"numa-scheduler bench: no cluster ({args.kubeconfig} does not exist); bring the lab up first")
        return 0
    env = {**os.environ, "KUBECONFIG": str(args.kubeconfig),
           "NUMALAB_SSH_CONFIG": os.environ.get("NUMALAB_SSH_CONFIG", str(args.kubeconfig.parent / "ssh_config"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "e2e", "-p", "no:cacheprovider", "-k", "numa_aware"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    found = figures(done.stdout)
    if set(found) != {"default-scheduler", "numa-aware"}:
        print(done.stdout[-3000:] + done.stderr[-2000:])
        print("numa-scheduler bench: the e2e case gave no figures for both schedulers")
        return 1
    print(f"{'scheduler':<18} {'running':>7} {'rejected':>8} {'pending':>7} {'decided in':>10}")
    for scheduler in ("default-scheduler", "numa-aware"):
        running, rejected, pending, seconds = found[scheduler]
        print(f"{scheduler:<18} {running:>7} {rejected:>8} {pending:>7} {seconds:>8} s")
    for line in done.stdout.splitlines():  # the same pods as one NUMA-aware Deployment: no rejection loop
        if row := DEPLOYMENT.search(line):
            print(f"numa-aware Deployment ({row.group(1)}): {row.group(2)}")
    default, aware = found["default-scheduler"], found["numa-aware"]
    print(f"rejections: {default[1]} -> {aware[1]} (goal 0 with numa-aware); "
          f"time to all decided, numa-aware / default: {aware[3] / max(default[3], 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
