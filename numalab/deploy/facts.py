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
    """A small file's text ('' when absent): the kubelet's previous config for the policy-change reset, the
    RKE2 install marker."""

    default = str

    def command(self, path: str) -> str:
        return f"cat {shlex.quote(path)} 2>/dev/null || true"

    def process(self, output: list[str]) -> str:
        return "\n".join(output)
