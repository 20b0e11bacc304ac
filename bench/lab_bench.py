"""Lab bring-up benchmark: the four default guests from `pyinfra` start to SSH-ready, with a cached image.

Runs the real CLI on inventories/kvm.py under a separate lab name and subnet, so a lab you already
run is not touched:
  1. build (or reuse) the base image, outside the timing;
  2. `pyinfra -y inventories/kvm.py exec -- true`: every guest defined, booted and reached over SSH;
  3. `pyinfra -y inventories/kvm.py deploys/cluster.py` twice: the base stage, then the no-change run;
  4. `numalab lab destroy`.
Prints the times and their ratios; asserts nothing about them.
"""

from __future__ import annotations

import os
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
from numalab.lab.spec import settings_from_env  # noqa: E402


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{' '.join(argv)} failed (exit {done.returncode})")
    return elapsed


def main() -> int:
    state = Path(tempfile.mkdtemp(prefix="numalab-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMALAB_")}
    subnet = free_subnet("qemu:///system", first=200, last=250)
    env.update(NUMALAB_NAME=f"bench-{os.getpid()}", NUMALAB_STATE_DIR=str(state / "state"), NUMALAB_SUBNET=subnet)
    settings = settings_from_env(env)
    started = time.monotonic()
    built_image(Recipe(), settings.image_dir.expanduser())
    image_s = time.monotonic() - started
    pyinfra = [str(BIN / "pyinfra"), "-y", "inventories/kvm.py"]
    try:
        up_s = timed([*pyinfra, "exec", "--", "true"], env)
        base_s = timed([*pyinfra, "deploys/cluster.py"], env)
        again_s = timed([*pyinfra, "deploys/cluster.py"], env)
    finally:
        destroy_s = timed([str(BIN / "numalab"), "lab", "destroy"], env)
    print(f"image (cached unless first run): {image_s:7.1f} s")
    print(f"4 guests pyinfra start -> SSH-ready: {up_s:7.1f} s")
    print(f"base stage, first run:             {base_s:7.1f} s")
    print(f"base stage, second (no-change) run: {again_s:7.1f} s")
    print(f"destroy:                           {destroy_s:7.1f} s")
    print(f"ratio bring-up / no-change run:    {up_s / again_s:7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
