"""The auditor, run at every PodResources poll: read each pinned container's real cpuset and judge it (audit.py).

PodResources names containers (namespace, pod, container) but their cgroups are named after the pod's UID
and the container's id, which only the API has (status.containerStatuses[].containerID; no kubelet file
the DaemonSet mounts holds them). So the node's Running pods are listed whole, from the API server's
watch cache, only when a pinned container's cgroup is not found with what is known: a new pinned pod, or
a container restarted under a new id. While some stay unfound (a container still starting: its CPUs are
assigned at admission, its cgroup comes later), the lists back off from the poll interval to a minute; a
quiet node lists nothing. The cpusets themselves are read at every poll (two small files per container),
so a cpuset changed behind the kubelet's back is reported within one poll; a node with no pinned container
reads nothing.

A tree that cannot be read gives an audit that is not readable (the gauges say unknown) and one warning;
its recovery one info line. A failed list is one info line (the publisher warns of the API's trouble), and
the containers it would have found stay unfound. Nothing raises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.audit import Audit, Key, Pinned, PodCgroups, audit, pinned_containers, pod_cgroups, stranded_cpus
from numa_align.backoff import Backoff
from numa_align.cgroups import CgroupReader, CgroupUnreadable, Cpuset
from numa_align.kubeapi import KubeApiError
from numa_align.kubeconfig import ConfigError
from numa_align.nrt import Allocatable, ExclusiveUse
from numa_align.sysfs import HostTopology

log = logging.getLogger(__name__)

RELIST_MOST = 60.0
"""Seconds between pod lists at most while a pinned container's cgroup stays unfound."""
NO_API = ("no API client (NUMA_ALIGN_NRT off): the pod UIDs and container ids that name the cgroups come from "
          "the API")


class Auditor:
    """`run(...)` audits one poll's pinned containers under `root`; `lookup` lists this node's Running pods
    (whole Pod objects; None without an API client), only while `may_ask()` (the publisher's API backoff is
    over); `lists` counts the lists made."""

    def __init__(self, root: Path, lookup: Callable[[], Iterable[Mapping[str, Any]]] | None, first: float, *,
                 may_ask: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.monotonic) -> None:
        self.reader = CgroupReader(root)
        self.lists = 0
        self.latest: Audit | None = None
        self._lookup = lookup
        self._may_ask = may_ask
        self._relist = Backoff(first, RELIST_MOST, clock=clock)
        self._pods: dict[tuple[str, str], PodCgroups] = {}
        self._list_failed = False

    def run(self, listed: pb.ListPodResourcesResponse, topology: HostTopology, allocatable: Allocatable,
            exclusive: ExclusiveUse) -> Audit:
        """The audit of the PodResources List answer `listed` on `topology`; never raises."""
        stranded = stranded_cpus(allocatable, exclusive)
        pinned = pinned_containers(listed)
        try:
            if pinned and self._lookup is None:
                raise CgroupUnreadable(NO_API)
            if pinned:  # nothing to read on a node without pinned containers: no I/O at all
                self.reader.check()
            result = audit(pinned, self._cpusets(pinned) if pinned else {}, topology, stranded)
        except CgroupUnreadable as exc:
            result = Audit(False, stranded=stranded, why=str(exc))
        self._say(result)
        self.latest = result
        return result

    def _cpusets(self, pinned: list[Pinned]) -> dict[Key, Cpuset]:
        real, missing = self._read(pinned)
        if not missing:
            self._relist.reset()  # a container that restarts later is looked up at once
        elif self._relist.is_due() and self._may_ask():
            self._list()
            more, missing = self._read(missing)
            real.update(more)
            if missing:
                self._relist.failed()
            else:
                self._relist.reset()
        return real

    def _read(self, pinned: Iterable[Pinned]) -> tuple[dict[Key, Cpuset], list[Pinned]]:
        real, missing = {}, []
        for container in pinned:
            pod = self._pods.get((container.namespace, container.pod))
            container_id = None if pod is None else pod.containers.get(container.container)
            cpuset = None if pod is None or container_id is None else self.reader.read(pod.uid, container_id)
            if cpuset is None:
                missing.append(container)
            else:
                real[container.key] = cpuset
        return real, missing

    def _list(self) -> None:
        assert self._lookup is not None
        self.lists += 1
        try:
            self._pods = pod_cgroups(self._lookup())
        except (KubeApiError, ConfigError) as exc:
            if not self._list_failed:  # info: the publisher warns of the API's trouble itself
                log.info("audit: cannot list this node's pods to find containers' cgroups (%s); "
                            "new pinned containers stay unaudited until it works", exc)
            self._list_failed = True
            return
        if self._list_failed:
            log.info("audit: listing this node's pods works again")
            self._list_failed = False

    def _say(self, result: Audit) -> None:
        """One line when the audit becomes unknown (or unknown for another reason), one when it is back."""
        before = self.latest
        if not result.readable and (before is None or before.readable or before.why != result.why):
            log.warning("audit: pinned containers' cpusets unknown: %s", result.why)
        elif result.readable and before is not None and not before.readable:
            log.info("audit: the cgroup tree at %s is read again", self.reader.root)
        if result.readable and (before is None or not before.readable or
                                (before.split, before.drift) != (result.split, result.drift)):
            for kind, names in (("split (CPUs and memory in different cells)", result.split),
                                ("cpuset drift (not what the kubelet assigned)", result.drift)):
                if names:
                    log.warning("audit: %s: %s", kind, ", ".join(names))
