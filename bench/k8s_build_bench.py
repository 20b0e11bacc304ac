"""Kubernetes binaries benchmark: the build time of `numalab k8s build` against its cache-hit time.

By default it builds nothing: it times a cache hit of go:VERSION (sums and --version checks included)
and reads the build time the entry's manifest.json recorded when it was built. A build runs only when
asked:
  --build   build go:VERSION first if it is not cached (minutes: 8 on 2 cores with a cold Go cache);
  --fresh   build into a new temporary cache root even if cached (numa-lab's cache cold; the Go module
            and build caches as the environment has them: set GOCACHE to an empty dir for a cold compile).
Prints the times and their ratio; asserts nothing about them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from numalab.k8s.binaries import resolve_binaries  # noqa: E402
from numalab.k8s.cache import default_cache_root, read_manifest  # noqa: E402
from numalab.k8s.errors import BinariesError  # noqa: E402
from numalab.k8s.versions import KUBERNETES_VERSION  # noqa: E402
from numalab.progress import Progress, Silent  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=KUBERNETES_VERSION, help="Kubernetes release (default: %(default)s)")
    parser.add_argument("--build", action="store_true", help="build first when not cached")
    parser.add_argument("--fresh", action="store_true", help="build into a new temporary cache root")
    parser.add_argument("--hits", type=int, default=3, help="cache hits to time (default: %(default)s)")
    args = parser.parse_args()
    spec = f"go:{args.version}"
    cache_root = Path(tempfile.mkdtemp(prefix="numalab-k8s-bench-")) if args.fresh else default_cache_root()
    try:
        build_s: float | None = None
        if args.build or args.fresh:
            started = time.monotonic()
            resolve_binaries(spec, cache_root, progress=Progress(prefix="bench build"))
            build_s = time.monotonic() - started
        hits = []
        for _ in range(max(1, args.hits)):
            started = time.monotonic()
            binaries = resolve_binaries(spec, cache_root, progress=Silent(), build=False)
            hits.append(time.monotonic() - started)
        manifest = read_manifest(binaries.directory.parent)
    except BinariesError as exc:
        print(f"k8s_build_bench: {exc}", file=sys.stderr)
        if "not built yet" in str(exc):
            print("k8s_build_bench: pass --build to build it (minutes), or run `numalab k8s build`", file=sys.stderr)
        return 2
    finally:
        if args.fresh:
            shutil.rmtree(cache_root, ignore_errors=True)
    recorded = float(manifest["seconds"])
    hit = min(hits)
    print(f"binaries: {binaries.source} ({binaries.directory})")
    if build_s is not None:
        print(f"build, this run (resolve incl. module download, tidy, go build, checks): {build_s:8.1f} s")
    print(f"build, as recorded in manifest.json when the entry was made:           {recorded:8.1f} s")
    print(f"cache hit (lock, sha256 of 4 binaries, 4x --version), best of {len(hits)}:      {hit:8.2f} s")
    print(f"ratio recorded build / cache hit:                                      {recorded / hit:8.0f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
