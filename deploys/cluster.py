"""The lab cluster, stage by stage: `pyinfra inventories/kvm.py deploys/cluster.py`.

Stages run in order on the guests of the inventory; every operation reads facts first, so a second
run reports no changes. Stage "base" prepares every guest for Kubernetes; the registry, RKE2 and
plugin stages follow it.
"""

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

K8S_MODULES = ("overlay", "br_netfilter")
K8S_SYSCTLS = {
    "net.ipv4.ip_forward": 1,
    "net.bridge.bridge-nf-call-iptables": 1,
    "net.bridge.bridge-nf-call-ip6tables": 1,
}
HOSTS_MARKER = "# {mark} numa-lab hosts"


@deploy("base")
def base() -> None:
    """Hostname, /etc/hosts with every lab host, swap off, the kernel modules and sysctls Kubernetes needs."""
    server.hostname(name="Set the hostname", hostname=host.data.kvm_guest)

    lab_hosts = host.data.lab_hosts
    files.block(
        name="List every lab host in /etc/hosts",
        path="/etc/hosts",
        content=[f"{address} {name}" for name, address in sorted(lab_hosts.items())],
        marker=HOSTS_MARKER,
    )

    active_swap = host.get_fact(Command, "tail -n +2 /proc/swaps")
    if active_swap:
        server.shell(name="Turn swap off", commands=["swapoff -a"])
    files.replace(
        name="Keep swap off after reboot",
        path="/etc/fstab",
        text=r"^([^#].*\sswap\s.*)$",
        replace=r"# \1",
    )

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


base()
