"""An Event on this node for each checkpoint numa-lab's kubelet guard moved aside at this boot.

`kubectl describe node` and `kubectl get events` are where an operator looks when a kubelet came back with
its CPU or Memory Manager state reset. The guard runs before the kubelet, with no API server to count on and
no credentials, so numa-align posts for it what its record says (guard_report.py), after an API turn of the
NRT publisher that succeeded.

Each Event's name is fixed by the node, the boot and the entry's place in the record, so a numa-align
restarted in the same boot is answered 409 AlreadyExists for what it posted before, which counts as done:
one Event per move however often numa-align starts, and no list or get to find out. The Events go to
namespace default, where the kubelet posts its Node's; involvedObject is the Node with its uid, as the node
controller's events have it (`kubectl describe node` finds both kinds). Without the right to create them
(403) it says so once and stops; any other failure is tried again at the next API turn.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any

from numa_align.guard_report import SetAside
from numa_align.kubeapi import ApiError, KubeApiError, KubeClient
from numa_align.kubeconfig import ConfigError

log = logging.getLogger(__name__)

NAMESPACE = "default"
REASON = "KubeletCheckpointSetAside"
COMPONENT = "numa-align"


def event_name(node: str, entry: SetAside, index: int) -> str:
    return f"{node}.numa-align-guard-{entry.boot_id[:8]}-{index}"


def event_body(node: str, node_uid: str, entry: SetAside, index: int, now: datetime.datetime) -> dict[str, Any]:
    """A core/v1 Event about the Node: `entry`, the `index`th move of the guard's record."""
    when = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(node, entry, index), "namespace": NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid},
        "reason": REASON,
        "type": "Warning",
        "message": f"numa-lab's kubelet guard moved {entry.file} to {entry.aside} at boot {entry.boot_id}: "
                   f"{entry.reason}",
        "source": {"component": COMPONENT, "host": node},
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }


class GuardEvents:
    """Posts one Event per entry `offer`ed, in order, each until it is posted or already there."""

    def __init__(self, client: KubeClient, node: str, *,
                 wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)) -> None:
        self.client = client
        self.node = node
        self.refused = False
        """Answered 403: not tried again (numa-align lacks the right; the metric still shows the moves)."""
        self._pending: list[tuple[int, SetAside]] = []
        self._posted: set[str] = set()
        self._wall = wall
        self._failing = False

    def offer(self, set_aside: Sequence[SetAside]) -> None:
        """The record's entries now (it changed): those not posted yet are posted at the next `post`."""
        self._pending = [(index, entry) for index, entry in enumerate(set_aside)
                         if event_name(self.node, entry, index) not in self._posted]

    @property
    def pending(self) -> int:
        return 0 if self.refused else len(self._pending)

    def post(self, node_uid: Callable[[], str]) -> None:
        """Post what is not posted yet; never raises (a failure is logged and left for the next call)."""
        while self._pending and not self.refused:
            index, entry = self._pending[0]
            name = event_name(self.node, entry, index)
            try:
                self.client.create_event(event_body(self.node, node_uid(), entry, index, self._wall()))
                log.info("posted Event %s/%s: the kubelet guard moved %s aside at this boot", NAMESPACE, name,
                         entry.file)
            except ApiError as exc:
                if exc.status == 403:
                    log.warning("the Event that the kubelet guard moved %s aside is not posted, and no other will "
                                "be (the metric numa_align_kubelet_checkpoint_set_aside still shows it): %s",
                                entry.file, exc)
                    self.refused = True
                    return
                if exc.status != 409:  # 409: posted by this numa-align before its restart, in this boot
                    return self._failed(name, exc)
            except (KubeApiError, ConfigError) as exc:
                return self._failed(name, exc)
            self._pending.pop(0)
            self._posted.add(name)
            self._failing = False

    def _failed(self, name: str, exc: Exception) -> None:
        (log.debug if self._failing else log.warning)(
            "Event %s/%s not posted, trying again at the next API turn: %s", NAMESPACE, name, exc)
        self._failing = True
