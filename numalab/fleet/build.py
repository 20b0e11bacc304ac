"""`python -m numalab.fleet.build`: build (or find cached) every binary the fleet simulation runs.

Go builds take minutes on two cores (run it under `nice -n 19` beside the lab); cached ones take seconds.
Prints `NAME PATH` per binary on stdout, progress on stderr; exits 2 with one line when a build fails.
"""

from __future__ import annotations

import sys

from numalab.fleet.binaries import fleet_binaries
from numalab.fleet.errors import FleetError
from numalab.progress import Progress


def main() -> int:
    try:
        binaries = fleet_binaries(build=True, progress=Progress(prefix="numalab fleet build"))
    except FleetError as exc:
        print(f"numalab fleet build: {exc}", file=sys.stderr)
        return 2
    for name, path in binaries.named().items():
        print(f"{name} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
