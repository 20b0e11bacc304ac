"""Stage `base`: what every host needs before Kubernetes, whatever its role."""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

from numalab.deploy import context

K8S_MODULES = ("overlay", "br_netfilter")
K8S_SYSCTLS = {
    "net.ipv4.ip_forward": 1,
    "net.bridge.bridge-nf-call-iptables": 1,
    "net.bridge.bridge-nf-call-ip6tables": 1,
}
HOSTS_MARKER = "# {mark} numa-lab hosts"
# An fstab entry whose type (third field) is swap and that is not commented out yet. Extended regex: the
# group is captured for sed's \1 (in a basic regex `(` is a literal and the line never matches).
FSTAB_SWAP_ENTRY = (r"^([[:space:]]*[^#[:space:]][^[:space:]]*"  # the first field, not a comment
                    r"[[:space:]]+[^[:space:]]+[[:space:]]+swap([[:space:]].*)?)$")  # the second; type swap


def hosts_entries() -> dict[str, str]:
    """Every lab guest (lab inventories), else every cluster host: names resolve without DNS."""
    lab_hosts = host.data.get("lab_hosts")
    if lab_hosts:
        return dict(lab_hosts)
    return context.cluster_of(host).hosts_entries() if context.role_of(host) else {}


def keep_swap_off(fstab: str = "/etc/fstab") -> OperationMeta:
    """Comment out the swap entries of `fstab`, or swap comes back at the next boot (the kubelet refuses it)."""
    return files.replace(
        name=f"Keep swap off after reboot (swap entries of {fstab} commented out)",
        path=fstab,
        text=FSTAB_SWAP_ENTRY,
        replace=r"# \1",
        extended_regex=True,
    )


@deploy("base")
def base() -> None:
    """Hostname, /etc/hosts with every lab host, swap off, the kernel modules and sysctls Kubernetes needs."""
    server.hostname(name="Set the hostname", hostname=context.node_name(host))

    entries = hosts_entries()
    if entries:
        files.block(
            name="List every lab host in /etc/hosts",
            path="/etc/hosts",
            content=[f"{address} {name}" for name, address in sorted(entries.items())],
            marker=HOSTS_MARKER,
        )

    active_swap = host.get_fact(Command, "tail -n +2 /proc/swaps")
    if active_swap:
        server.shell(name="Turn swap off", commands=["swapoff -a"])
    keep_swap_off()

    for module in K8S_MODULES:
        server.modprobe(name=f"Load kernel module {module}", module=module)
    files.put(
        name="Load the Kubernetes kernel modules at boot",
        src=StringIO("".join(f"{module}\n" for module in K8S_MODULES)),
        dest="/etc/modules-load.d/numa-lab-k8s.conf",
        mode="644",
    )

    for key, value in K8S_SYSCTLS.items():
        server.sysctl(
            name=f"Set {key}={value}",
            key=key,
            value=value,
            persist=True,
            persist_file="/etc/sysctl.d/90-numa-lab-k8s.conf",
        )
