"""Benchmark: fleet scale by simulation (issue 28). For each size (100, 1,000 and 5,000 nodes by default), one
native control plane on loopback with kwok nodes whose kubelet is numa-lab's explain engine; the default
kube-scheduler and the numa-scheduler with each scoring strategy fill the empty fleet in turn until it is full.
Prints a table (throughput, bind latency, rejections, packing, NodeResourceTopology writes, scheduler RSS) and
writes results.json, table.txt and PNG plots under --out (default ./fleet-scale).

Usage: python bench/fleet_scale.py [--sizes 100,1000,5000] [--strategies ...] [--rate 20] [--seed 1]
       [--out DIR] [--fleet SPEC.yaml] [--port NAME=PORT]    (numalab.fleet.cli says the rest; --help)
The binaries come from numa-lab's cache: `python -m numalab.fleet.build` first (`make scale` does).
Not named *_bench.py: `make bench` does not run it (an hour at 5,000 nodes); `make scale` does.
"""

from __future__ import annotations

import sys

from numalab.fleet.cli import main

if __name__ == "__main__":
    sys.exit(main())
