"""The device manager's side of one registered plugin, as the kubelet drives it.

After Register the kubelet dials `<dir>/<endpoint>`, calls GetDevicePluginOptions, keeps a ListAndWatch
stream open for the device list, and at pod admission calls GetPreferredAllocation (when the plugin
offers it) and then Allocate with one container request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import grpc
from numa_align.api import deviceplugin_v1beta1_pb2 as api
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc

DIAL_TIMEOUT = 10.0
"""Seconds the kubelet waits for a plugin's socket to answer."""


class PluginClient:
    """A connection to one plugin resource; `updates` holds every ListAndWatch response in order."""

    def __init__(self, resource: str, socket: Path, generation: int) -> None:
        self.resource = resource
        self.socket = socket
        self.generation = generation
        """The kubelet run (0, 1, ... one per restart) that accepted the registration."""
        self.options: api.DevicePluginOptions | None = None
        self.updates: list[list[api.Device]] = []
        self.stream_status: grpc.StatusCode | None = None
        """How ListAndWatch ended: OK when the plugin ended it, CANCELLED when the kubelet went away."""
        self.error: str | None = None
        self._cond = threading.Condition()
        self._channel = grpc.insecure_channel(f"unix:{socket}")
        self._stub = api_grpc.DevicePluginStub(self._channel)
        self._stream = None
        self._thread = threading.Thread(target=self._run, name=f"lw-{resource}", daemon=True)

    def connect(self) -> None:
        """Dial, fetch the options and start following ListAndWatch (in a thread).

        wait_for_ready instead of channel_ready_future: the latter makes every close take 200 ms."""
        self.options = self._stub.GetDevicePluginOptions(api.Empty(), timeout=DIAL_TIMEOUT, wait_for_ready=True)
        self._stream = self._stub.ListAndWatch(api.Empty())
        self._thread.start()

    def close(self) -> None:
        """Drop the connection, as a stopping kubelet does."""
        if self._stream is not None:
            self._stream.cancel()
        self._channel.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    # -- what the kubelet sees ---------------------------------------------------------------------

    @property
    def devices(self) -> list[api.Device]:
        with self._cond:
            return list(self.updates[-1]) if self.updates else []

    def wait_for(self, predicate: Callable[[PluginClient], bool], timeout: float = 10.0) -> bool:
        """Wait until predicate(self) holds (re-checked on every update and at stream end)."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout=timeout)

    def stream_ended(self, timeout: float = 10.0) -> grpc.StatusCode | None:
        self._thread.join(timeout=timeout)
        return self.stream_status

    # -- calls the kubelet makes at pod admission --------------------------------------------------

    def preferred(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        request = api.PreferredAllocationRequest(
            container_requests=[
                api.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size
                )
            ]
        )
        response = self._stub.GetPreferredAllocation(request, timeout=DIAL_TIMEOUT)
        return list(response.container_responses[0].deviceIDs)

    def allocate(self, *containers: list[str]) -> list[api.ContainerAllocateResponse]:
        """Allocate with one ContainerAllocateRequest per argument (the kubelet sends one per container)."""
        request = api.AllocateRequest(
            container_requests=[api.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
        )
        return list(self._stub.Allocate(request, timeout=DIAL_TIMEOUT).container_responses)

    def admit(self, count: int) -> dict[str, str]:
        """Admit a container asking `count` devices: pick healthy ones (preferred if offered), Allocate,
        and return the environment the container would get."""
        healthy = [d.ID for d in self.devices if d.health == "Healthy"]
        if len(healthy) < count:
            raise RuntimeError(f"{self.resource}: {count} devices asked, {len(healthy)} healthy")
        chosen = healthy[:count]
        if self.options is not None and self.options.get_preferred_allocation_available:
            chosen = self.preferred(healthy, [], count)
        (response,) = self.allocate(chosen)
        return dict(response.envs)

    def _run(self) -> None:
        try:
            for response in self._stream:
                with self._cond:
                    self.updates.append(list(response.devices))
                    self._cond.notify_all()
            status = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            status = exc.code()
            self.error = exc.details()
        with self._cond:
            self.stream_status = status
            self._cond.notify_all()
