"""The CNI state a node keeps only for the boot it was written in: /var/lib/cni on a tmpfs.

host-local's IP leases (networks/<network>/<address>, each naming a container) and libcni's cached results
(results/) describe the pod sandboxes of the running boot, and after a reboot every one of those is gone. On
disk they outlived it, and a hard reset (no clean shutdown) could leave a file written just before it empty:
containerd then failed to tear the old sandbox down ("failed to get network "numa-lab" cached result:
decoding version from network config: unexpected end of JSON input"), the kubelet never got the pod a new
one, and the empty lease kept its address taken. On a tmpfs the state goes with the boot it describes;
tearing down a sandbox of the boot before runs without a cached result, which libcni and the bridge and
host-local plugins accept (nothing cached, no lease: nothing to release).

The mount is enabled for every boot, and started at once only where no lease is held yet (no pod sandbox has
an address: a node's first deploy): mounting over live leases would hand a running pod's address to the
next pod. Elsewhere it takes effect at the next boot, which is when the state on disk goes stale.
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.facts.server import Command
from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from numalab.render import render

PATH = "/var/lib/cni"
UNIT = "var-lib-cni.mount"  # systemd names a mount unit after its path
SIZE = "16m"  # a lease is a few bytes and a cached result a few KiB: thousands of sandboxes fit
STATE_COMMAND = (f"if mountpoint -q {PATH}; then echo mounted; "
                 f"elif find {PATH}/networks -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null "
                 "| grep -q .; then echo leases; else echo empty; fi")


def boot_scoped_cni_state() -> None:
    """The mount unit, enabled; started now when the node holds no lease (see the module docstring)."""
    unit = files.put(name=f"{UNIT}: the CNI state of this boot only, on a tmpfs",
                     src=StringIO(render("k8s/var-lib-cni.mount.j2", unit=UNIT, path=PATH, size=SIZE)),
                     dest=f"/etc/systemd/system/{UNIT}", mode="644")
    systemd.daemon_reload(name=f"Reload systemd for {UNIT}", _if=any_changed(unit))
    state = host.get_fact(Command, STATE_COMMAND)
    if state == "leases":
        systemd.service(name=f"{UNIT} enabled (from the next boot: pods hold CNI leases now)", service=UNIT,
                        running=None, enabled=True)
    else:
        systemd.service(name=f"{UNIT} enabled and mounted", service=UNIT, running=True, enabled=True)
