"""What `numa-align inspect` reads from the kubelet: the PodResources API, checkpoint files, pod log dirs.

Each reader raises InspectError naming the source and what to check; a part an older kubelet lacks
(GetAllocatableResources, memory_manager_state) is reported as absent instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from numa_align.api import podresources_v1_pb2 as pb
from numa_align.api import podresources_v1_pb2_grpc as pb_grpc

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
DEFAULT_STATE_DIR = Path("/var/lib/kubelet")
DEFAULT_POD_LOG_DIR = Path("/var/log/pods")
CPU_STATE = "cpu_manager_state"
MEMORY_STATE = "memory_manager_state"
RPC_TIMEOUT = 10.0
"""Seconds to wait for each PodResources call; the kubelet answers from memory, so this is generous."""


class InspectError(RuntimeError):
    """A source the inspector needs is missing or unreadable; the message names it and what to check."""


@dataclass(frozen=True)
class PodResources:
    """What the PodResources API answered; `allocatable` is None when the kubelet does not serve it."""

    listed: pb.ListPodResourcesResponse
    allocatable: pb.AllocatableResourcesResponse | None
    no_allocatable: str = ""
    """Why `allocatable` is None, for the report."""


def query_pod_resources(socket: Path, timeout: float = RPC_TIMEOUT) -> PodResources:
    """List and GetAllocatableResources from the kubelet's pod-resources socket.

    A kubelet without GetAllocatableResources (UNIMPLEMENTED before 1.21, "disabled" without its feature
    gate before 1.23) still gives a report; any other failure raises InspectError.
    """
    if not socket.exists():
        raise InspectError(f"no socket at {socket}: is the kubelet running on this node?")
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        return _ask(pb_grpc.PodResourcesListerStub(channel), socket, timeout)


class PodResourcesReader:
    """query_pod_resources for a caller that asks every few seconds: one channel kept open per socket (gRPC
    reconnects it when the kubelet restarts), instead of a connection set up and torn down each time."""

    def __init__(self, timeout: float = RPC_TIMEOUT) -> None:
        self.timeout = timeout
        self._socket: Path | None = None
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.PodResourcesListerStub | None = None

    def __call__(self, socket: Path) -> PodResources:
        if not socket.exists():
            self.close()
            raise InspectError(f"no socket at {socket}: is the kubelet running on this node?")
        if self._stub is None or socket != self._socket:
            self.close()
            self._socket, self._channel = socket, grpc.insecure_channel(f"unix://{socket}")
            self._stub = pb_grpc.PodResourcesListerStub(self._channel)
        return _ask(self._stub, socket, self.timeout)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._socket = self._channel = self._stub = None


def _ask(stub: pb_grpc.PodResourcesListerStub, socket: Path, timeout: float) -> PodResources:
    try:
        listed = stub.List(pb.ListPodResourcesRequest(), timeout=timeout)
    except grpc.RpcError as exc:
        raise _api_error(socket, exc) from None
    try:
        allocatable = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=timeout)
    except grpc.RpcError as exc:
        why = _allocatable_not_served(exc)
        if not why:
            raise _api_error(socket, exc) from None
        return PodResources(listed, None, why)
    return PodResources(listed, allocatable)


def _api_error(socket: Path, exc: grpc.RpcError) -> InspectError:
    return InspectError(f"PodResources API at {socket}: {exc.code().name}: {exc.details()}")


def _allocatable_not_served(exc: grpc.RpcError) -> str:
    """Why GetAllocatableResources failed if the kubelet lacks it, else ''."""
    if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
        return "GetAllocatableResources is UNIMPLEMENTED (kubelets before 1.21 lack it)"
    if exc.code() == grpc.StatusCode.UNKNOWN and "GetAllocatableResources disabled" in (exc.details() or ""):
        return ("GetAllocatableResources is disabled (kubelets before 1.23 serve it only with the "
                "KubeletPodResourcesGetAllocatable feature gate)")
    return ""


def read_checkpoint(path: Path) -> dict[str, Any]:
    """A kubelet checkpoint file (JSON with policyName and entries)."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InspectError(f"cannot read {path}: {exc.strerror} (the kubelet writes it at start)") from None
    except json.JSONDecodeError as exc:
        raise InspectError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or "policyName" not in data:
        raise InspectError(f"{path} has no policyName: not a kubelet checkpoint")
    return data


def read_optional_checkpoint(path: Path) -> dict[str, Any] | None:
    """A checkpoint an older kubelet may not write (memory_manager_state before 1.21): None if absent."""
    if not path.exists():
        return None
    return read_checkpoint(path)


def pod_uids(log_dir: Path) -> dict[tuple[str, str], str]:
    """{(namespace, name): uid} from the kubelet's per-pod log directories `<ns>_<name>_<uid>`.

    Names and namespaces are DNS labels/subdomains and never hold "_", so the split is unambiguous.
    """
    if not log_dir.is_dir():
        raise InspectError(f"{log_dir} is not a directory (the kubelet keeps one log directory per pod there)")
    uids: dict[tuple[str, str], str] = {}
    for entry in log_dir.iterdir():
        parts = entry.name.split("_")
        if entry.is_dir() and len(parts) == 3:
            uids[(parts[0], parts[1])] = parts[2]
    return uids
