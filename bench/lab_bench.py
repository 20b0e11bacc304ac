"""Lab bring-up benchmark: guests from `pyinfra` start to SSH-ready, with a cached image.

Runs the real CLI on inventories of 1, 2 and 4 guests (the default lab's guests, in its order) under a
separate lab name and subnet, so a lab you already run is not touched:
  1. build (or reuse) the base image, outside the timing;
  2. `pyinfra -y INVENTORY exec -- systemd-analyze`: every guest defined, booted and reached over SSH
     (and its boot finished), and each guest's own boot timeline (kernel, userspace) as systemd measured it;
  3. `numalab lab destroy`.
Prints the times, the scaling ratios and the slowest guest's timeline; asserts nothing about them.
`--cluster` also times the full cluster deploy of the 4-guest lab, its no-change second run and the
e2e suite (upstream Kubernetes; builds the binaries first if they are not cached).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO))

from numalab.lab.image import Recipe, built_image  # noqa: E402
from numalab.lab.provisioning import free_subnet  # noqa: E402
from numalab.lab.settings import settings_from_env  # noqa: E402

DEFAULT_ORDER = ("worker-1", "worker-2", "server", "registry")
_STARTUP = re.compile(r"\[@kvm/(\S+)\]\s+Startup finished in (.*?) \(kernel\) \+ (.*?) \(userspace\)")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{' '.join(argv)} failed (exit {done.returncode})")
    return elapsed, done.stdout + done.stderr


def inventory(path: Path, guests: tuple[str, ...]) -> Path:
    """inventories/kvm.py limited to `guests` (the default lab's shapes)."""
    path.write_text(
        f"exec(open({str(REPO / 'inventories' / 'kvm.py')!r}).read())\n"
        f"_keep = {list(guests)!r}\n"
        "_GUESTS[:] = [g for g in _GUESTS if g['name'] in _keep]\n"
        "_lab = lab_from_dict({'settings': settings_from_env(os.environ).to_dict(), 'guests': _GUESTS})\n"
        "_groups = pyinfra_groups(_lab)\n"
        "lab_guests = _groups['lab_guests']\n"
        "registry = _groups.get('registry', [])\n"
        "rke2_servers = _groups.get('rke2_servers', [])\n"
        "rke2_agents = _groups.get('rke2_agents', [])\n"
    )
    return path


def bring_up(count: int, work: Path, env: dict[str, str]) -> tuple[float, str]:
    guests = DEFAULT_ORDER[:count]
    path = inventory(work / f"inventory-{count}.py", guests)
    try:
        # SSH answers a little before the boot ends; --wait lets systemd-analyze see the finished timeline.
        command = "systemctl is-system-running --wait >/dev/null; systemd-analyze"
        return timed([str(BIN / "pyinfra"), "-y", str(path), "exec", "--", command], env)
    finally:
        timed([str(BIN / "numalab"), "lab", "destroy", "--inventory", str(path)], env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cluster", action="store_true", help="also time the cluster deploy and the e2e suite")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="numalab-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    subnet = free_subnet("qemu:///system", first=200, last=250)
    env.update(NUMALAB_NAME=f"bench-{os.getpid()}", NUMALAB_STATE_DIR=str(work / "state"), NUMALAB_SUBNET=subnet,
               NUMALAB_DISTRIBUTION="upstream", NUMALAB_QUIET="1")
    started = time.monotonic()
    built_image(Recipe(), settings_from_env(env).image_dir.expanduser())
    print(f"image (cached unless first run):      {time.monotonic() - started:7.1f} s")
    figures = {}
    for count in (1, 2, 4):
        figures[count], output = bring_up(count, work, env)
        print(f"{count} guest(s) pyinfra start -> SSH-ready: {figures[count]:7.1f} s (goal for 4: < 90 s)")
        for name, kernel, userspace in _STARTUP.findall(output):
            print(f"    {name:9} kernel {kernel:>10}  userspace {userspace:>10}")
    print(f"ratio 4 guests / 1 guest:             {figures[4] / figures[1]:7.2f}x")
    print(f"ratio 2 guests / 1 guest:             {figures[2] / figures[1]:7.2f}x")
    if args.cluster:
        cluster(work, env)
    return 0


def cluster(work: Path, env: dict[str, str]) -> None:
    path = REPO / "inventories" / "kvm.py"
    pyinfra = [str(BIN / "pyinfra"), "-y", str(path), str(REPO / "deploys" / "cluster.py")]
    try:
        deploy_s, _ = timed(pyinfra, env)
        again_s, _ = timed(pyinfra, env)
        state = Path(env["NUMALAB_STATE_DIR"])
        e2e_env = {**env, "KUBECONFIG": str(state / "kubeconfig"), "NUMALAB_SSH_CONFIG": str(state / "ssh_config")}
        e2e_s, _ = timed([str(BIN / "pytest"), "e2e", "-q", "-p", "no:cacheprovider"], e2e_env)
    finally:
        timed([str(BIN / "numalab"), "lab", "destroy", "--inventory", str(path)], env)
    print(f"cluster: lab up to every node verified: {deploy_s:7.1f} s")
    print(f"cluster: second (no-change) run:        {again_s:7.1f} s")
    print(f"cluster: e2e suite:                     {e2e_s:7.1f} s")
    print(f"ratio first / second run:               {deploy_s / again_s:7.2f}x")


if __name__ == "__main__":
    sys.exit(main())
