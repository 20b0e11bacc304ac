"""Facts the cluster stages read from hosts before deciding what to change."""

from __future__ import annotations

import shlex

from numa_align.sysfs import DUMP_COMMAND, SysfsDump
from pyinfra.api import FactBase


class NumaSysfs(FactBase[SysfsDump]):
    """The files numa-align's sysfs reader reads (node/online, cpu/online, each node's cpulist, meminfo,
    distance and hugepages, each CPU's thread siblings and package), as printed on the host; read them with
    `numa_align.sysfs.read_host`, the same reader numa-align and `numalab kubelet-args` use.

    .. code:: python

        SysfsDump(files={"node/online": "0-1\\n", "cpu/online": "0-3\\n", ...})
    """

    def command(self) -> str:
        return DUMP_COMMAND

    def process(self, output: list[str]) -> SysfsDump:
        return SysfsDump(output)


class TextFile(FactBase[str]):
    """A small file's text ('' when absent, and when empty): the kubelet's previous config and its manager
    checkpoints for the reset plan, the RKE2 install marker."""

    default = str

    def command(self, path: str) -> str:
        return f"cat {shlex.quote(path)} 2>/dev/null || true"

    def process(self, output: list[str]) -> str:
        return "\n".join(output)


class StampedFile(FactBase[dict]):
    """A file's inode, size, mtime (ns) and mode, and the stamp numa-lab wrote when it put the file there
    (`stamped_file`): {"file": [inode, size, mtime, mode] or None, "stamp": [sha256, inode, size, mtime] or None}.

    .. code:: python

        {"file": ["1234", "83886080", "1795620000.123456789", "755"], "stamp": ["ab12...", "1234", ...]}
    """

    def command(self, path: str, stamp: str) -> str:
        return (f"echo \"file $(stat -c '%i %s %.9Y %a' {shlex.quote(path)} 2>/dev/null)\"; "
                f"echo \"stamp $(cat {shlex.quote(stamp)} 2>/dev/null)\"")

    def process(self, output: list[str]) -> dict:
        seen = {line.split(" ", 1)[0]: line.split()[1:] for line in output if line.strip()}
        return {"file": seen.get("file") or None, "stamp": seen.get("stamp") or None}


class Virtualization(FactBase[str]):
    """What `systemd-detect-virt --vm` says the host runs on: "none" on bare metal, "kvm" for a guest with
    hardware virtualization, "qemu" for one emulated in software (TCG), "" when the tool is absent."""

    default = str

    def command(self) -> str:
        return "systemd-detect-virt --vm 2>/dev/null || true"

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""
