"""A stand-in for the kubelet's PodResources v1 service, served on a unix socket like the real one.

The kubelet answers List and GetAllocatableResources from its managers' memory; this double answers from
what a test put in it (`set_pods`, `set_allocatable`), with the same messages, so `numa-align inspect`
is exercised over real gRPC without a kubelet. `fail` makes a method answer an error status instead, as
older kubelets do: GetAllocatableResources is UNIMPLEMENTED before 1.21 and UNKNOWN "Pod Resources API
GetAllocatableResources disabled" without its feature gate before 1.23.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.api import podresources_v1_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class Devices:
    resource: str
    ids: Sequence[str]
    numa: Sequence[int] = ()


@dataclass(frozen=True)
class Memory:
    type: str
    size: int
    numa: Sequence[int] = ()


@dataclass(frozen=True)
class ContainerAlloc:
    name: str
    cpus: Sequence[int] = ()
    devices: Sequence[Devices] = ()
    memory: Sequence[Memory] = ()


@dataclass(frozen=True)
class PodAlloc:
    namespace: str
    name: str
    containers: Sequence[ContainerAlloc] = field(default_factory=tuple)


def _topology(numa: Iterable[int]) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in numa])


def _devices(devices: Iterable[Devices]) -> list[pb.ContainerDevices]:
    return [pb.ContainerDevices(resource_name=d.resource, device_ids=list(d.ids), topology=_topology(d.numa))
            for d in devices]


def _memory(blocks: Iterable[Memory]) -> list[pb.ContainerMemory]:
    return [pb.ContainerMemory(memory_type=m.type, size=m.size, topology=_topology(m.numa)) for m in blocks]


def _pod(pod: PodAlloc) -> pb.PodResources:
    return pb.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=[
            pb.ContainerResources(name=c.name, cpu_ids=list(c.cpus), devices=_devices(c.devices),
                                  memory=_memory(c.memory))
            for c in pod.containers
        ],
    )


class PodResourcesDouble(pb_grpc.PodResourcesListerServicer):
    """The service, with its state behind one lock; `calls` counts requests per method."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: list[PodAlloc] = []
        self._allocatable = pb.AllocatableResourcesResponse()
        self._failures: dict[str, tuple[grpc.StatusCode, str]] = {}
        self.calls: dict[str, int] = {"List": 0, "GetAllocatableResources": 0, "Get": 0}

    def fail(self, method: str, code: grpc.StatusCode, details: str) -> None:
        """From now on `method` (e.g. "GetAllocatableResources") answers `code` with `details`."""
        if method not in self.calls:
            raise ValueError(f"{method!r} is not a PodResources method (expected one of {sorted(self.calls)})")
        with self._lock:
            self._failures[method] = (code, details)

    def _count(self, method: str, context: grpc.ServicerContext) -> None:
        """Count a call (the lock is held) and abort it if the test asked the method to fail."""
        self.calls[method] += 1
        failure = self._failures.get(method)
        if failure is not None:
            context.abort(*failure)

    def set_pods(self, pods: Iterable[PodAlloc]) -> None:
        with self._lock:
            self._pods = list(pods)

    def set_allocatable(self, cpus: Iterable[int], devices: Iterable[Devices] = (),
                        memory: Iterable[Memory] = ()) -> None:
        with self._lock:
            self._allocatable = pb.AllocatableResourcesResponse(
                cpu_ids=list(cpus), devices=_devices(devices), memory=_memory(memory))

    def List(self, request, context):  # noqa: N802 - gRPC method name
        with self._lock:
            self._count("List", context)
            return pb.ListPodResourcesResponse(pod_resources=[_pod(p) for p in self._pods])

    def GetAllocatableResources(self, request, context):  # noqa: N802
        with self._lock:
            self._count("GetAllocatableResources", context)
            response = pb.AllocatableResourcesResponse()
            response.CopyFrom(self._allocatable)
            return response

    def Get(self, request, context):  # noqa: N802
        with self._lock:
            self._count("Get", context)
            for pod in self._pods:
                if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                    return pb.GetPodResourcesResponse(pod_resources=_pod(pod))
        context.abort(grpc.StatusCode.UNKNOWN,
                      f"pod {request.pod_name} in namespace {request.pod_namespace} not found")


@contextmanager
def serve_pod_resources(socket: Path, double: PodResourcesDouble | None = None) -> Iterator[PodResourcesDouble]:
    """Serve a double on `socket` (as the kubelet serves pod-resources/kubelet.sock) until the block ends."""
    double = double or PodResourcesDouble()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_PodResourcesListerServicer_to_server(double, server)
    if server.add_insecure_port(f"unix://{socket}") == 0:
        raise RuntimeError(f"cannot bind the PodResources double to {socket}")
    server.start()
    try:
        yield double
    finally:
        server.stop(grace=None).wait()
