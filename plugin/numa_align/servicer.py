"""The DevicePlugin service of one NUMA node (resource `numa-align/numa-N`).

State sits behind one condition: `set_devices` bumps a version and wakes the ListAndWatch streams, which
send the whole list again only when the version moved. `end_streams` ends the current streams cleanly
(status OK), which the plugin does before it stops a server or exits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator

import grpc

from numa_align.api import deviceplugin_v1beta1_pb2 as api
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc
from numa_align.devices import NODE_ENV, build_devices, device_id, parse_device_id, resource_name
from numa_align.metrics import Metrics

log = logging.getLogger(__name__)

OPTIONS = api.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)
END_WAIT = 2.0
"""Seconds end_streams waits for the stream handlers to return before the server may be stopped."""


class NodeDevicePlugin(api_grpc.DevicePluginServicer):
    """Serves numa-N: advertises its devices, hands out NUMA_NODE=N, rejects ids of other nodes."""

    def __init__(self, node: int, metrics: Metrics) -> None:
        self.node = node
        self.resource = resource_name(node)
        self._metrics = metrics
        self._cond = threading.Condition()
        self._devices: tuple[api.Device, ...] = ()
        self._ids: frozenset[str] = frozenset()
        self._allocations = metrics.allocations.labels(resource=self.resource)
        self._count = 0
        self._healthy = True
        self._version = 0
        self._epoch = 0
        """Bumped by end_streams; a stream opened in an older epoch returns."""
        self._open_streams = 0

    # -- state -------------------------------------------------------------------------------------

    def set_devices(self, count: int, healthy: bool) -> bool:
        """Advertise `count` devices, all healthy or all unhealthy; return whether anything changed."""
        with self._cond:
            if (count, healthy) == (self._count, self._healthy) and self._version:
                return False
            self._count, self._healthy = count, healthy
            self._devices = build_devices(self.node, count, healthy)
            self._ids = frozenset(device.ID for device in self._devices)
            self._version += 1
            self._cond.notify_all()
        self._metrics.set_devices(self.resource, count, healthy)
        log.info("%s: %d devices, %s", self.resource, count, "healthy" if healthy else "unhealthy")
        return True

    @property
    def devices(self) -> tuple[api.Device, ...]:
        with self._cond:
            return self._devices

    def end_streams(self, wait: float = END_WAIT) -> None:
        """End every open ListAndWatch stream with status OK, and wait (at most `wait` s) until their
        handlers returned: a server stopped before that cancels the stream (UNAVAILABLE) instead."""
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._open_streams == 0, timeout=wait):
                log.warning("%s: %d ListAndWatch stream(s) still open %.1f s after ending them",
                            self.resource, self._open_streams, wait)

    # -- DevicePlugin service ----------------------------------------------------------------------

    def GetDevicePluginOptions(self, request: api.Empty, context: grpc.ServicerContext) -> api.DevicePluginOptions:
        return OPTIONS

    def ListAndWatch(self, request: api.Empty, context: grpc.ServicerContext) -> Iterator[api.ListAndWatchResponse]:
        context.add_callback(self._wake)
        with self._cond:
            epoch = self._epoch
            self._open_streams += 1
        sent = 0
        try:
            while True:
                with self._cond:
                    while self._version == sent and self._epoch == epoch and context.is_active():
                        self._cond.wait()
                    if self._epoch != epoch or not context.is_active():
                        return
                    sent, devices = self._version, self._devices
                yield api.ListAndWatchResponse(devices=devices)
        finally:
            with self._cond:
                self._open_streams -= 1
                self._cond.notify_all()

    def GetPreferredAllocation(
        self, request: api.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> api.PreferredAllocationResponse:
        responses = []
        for n, creq in enumerate(request.container_requests):
            known = self._known_ids()
            where = f"container_requests[{n}]"
            self._check_ids(context, creq.available_deviceIDs, known, f"{where}.available_deviceIDs")
            self._check_ids(context, creq.must_include_deviceIDs, known, f"{where}.must_include_deviceIDs")
            available = set(creq.available_deviceIDs)
            must = list(dict.fromkeys(creq.must_include_deviceIDs))
            missing = [d for d in must if d not in available]
            if missing:
                self._reject(context, f"{where}: must_include ids {missing} are not in available_deviceIDs")
            size = creq.allocation_size
            if not len(must) <= size <= len(available):
                self._reject(
                    context,
                    f"{where}: allocation_size {size} is outside [{len(must)} must_include, "
                    f"{len(available)} available]",
                )
            rest = sorted(available - set(must), key=lambda d: parse_device_id(d) or (0, 0))
            chosen = must + rest[: size - len(must)]
            responses.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: api.AllocateRequest, context: grpc.ServicerContext) -> api.AllocateResponse:
        known = self._known_ids()
        responses = []
        for n, creq in enumerate(request.container_requests):
            if not creq.devices_ids:
                self._reject(context, f"container_requests[{n}] lists no device ids", allocate=True)
            self._check_ids(context, creq.devices_ids, known, f"container_requests[{n}].devices_ids", allocate=True)
            responses.append(api.ContainerAllocateResponse(envs={NODE_ENV: str(self.node)}))
        self._allocations.inc(len(responses))
        return api.AllocateResponse(container_responses=responses)

    def PreStartContainer(
        self, request: api.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> api.PreStartContainerResponse:
        return api.PreStartContainerResponse()

    # -- helpers -----------------------------------------------------------------------------------

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _known_ids(self) -> frozenset[str]:
        with self._cond:
            return self._ids

    def _check_ids(
        self,
        context: grpc.ServicerContext,
        ids: Iterable[str],
        known: frozenset[str],
        where: str,
        allocate: bool = False,
    ) -> None:
        for text in ids:
            if text in known:
                continue
            parsed = parse_device_id(text)
            if parsed and parsed[0] != self.node:
                why = f"belongs to NUMA node {parsed[0]}, not to {self.resource}"
            else:
                why = f"is not a device of {self.resource} (ids are {device_id(self.node, 0)}.."
                why += f"{device_id(self.node, max(len(known) - 1, 0))})"
            self._reject(context, f"{where}: device id {text!r} {why}", allocate)

    def _reject(self, context: grpc.ServicerContext, message: str, allocate: bool = False) -> None:
        if allocate:
            self._metrics.allocate_errors.inc()
        log.warning("%s: rejected: %s", self.resource, message)
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
