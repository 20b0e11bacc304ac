"""Register resources with the kubelet's Registration service on kubelet.sock."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import grpc

from numa_align.api import DEVICE_PLUGIN_VERSION
from numa_align.api import deviceplugin_v1beta1_pb2 as api
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc
from numa_align.servicer import OPTIONS

log = logging.getLogger(__name__)

KUBELET_SOCKET = "kubelet.sock"
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 200),
]
"""gRPC waits 1 s before redialling a refused socket; a local kubelet.sock that is being recreated is
worth redialling within milliseconds (re-registration goal: < 300 ms)."""


class RegistrationError(RuntimeError):
    """The kubelet could not be reached or refused a resource; try again when kubelet.sock changes."""


def register(kubelet_socket: Path, endpoints: Iterable[tuple[str, str]], timeout: float = 2.0) -> list[str]:
    """Register (resource, endpoint) pairs over one channel; return the resources registered.

    Raises RegistrationError when the kubelet does not answer within `timeout` seconds; a resource the
    kubelet refuses is logged and left out of the result.
    """
    done: list[str] = []
    # wait_for_ready rides out a kubelet.sock that is bound but not yet listening; channel_ready_future
    # would cost 200 ms at channel close (its connectivity poller wakes every 200 ms).
    with grpc.insecure_channel(f"unix:{kubelet_socket}", options=CHANNEL_OPTIONS) as channel:
        stub = api_grpc.RegistrationStub(channel)
        for resource, endpoint in endpoints:
            request = api.RegisterRequest(
                version=DEVICE_PLUGIN_VERSION, endpoint=endpoint, resource_name=resource, options=OPTIONS
            )
            try:
                stub.Register(request, timeout=timeout, wait_for_ready=True)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise RegistrationError(f"no kubelet answers on {kubelet_socket}: {exc.details()}") from None
                log.error("kubelet refused %s: %s: %s", resource, exc.code().name, exc.details())
                continue
            log.info("registered %s (endpoint %s)", resource, endpoint)
            done.append(resource)
    return done
