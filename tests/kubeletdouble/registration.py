"""The kubelet's Registration service (deviceplugin v1beta1), as the kubelet checks a RegisterRequest."""

from __future__ import annotations

import re
from collections.abc import Callable

import grpc
from numa_align.api import deviceplugin_v1beta1_pb2 as api
from numa_align.api import deviceplugin_v1beta1_pb2_grpc as api_grpc

SUPPORTED_VERSIONS = ("v1beta1",)
# An extended resource name: a domain-qualified name outside kubernetes.io (like the kubelet's check).
_QUALIFIED = re.compile(
    r"^(?P<domain>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)"
    r"/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class RegistrationServicer(api_grpc.RegistrationServicer):
    """Checks version, resource name and endpoint, answers, then lets `on_register` dial the plugin
    (the kubelet dials asynchronously, after Register has returned)."""

    def __init__(self, on_register: Callable[[api.RegisterRequest], None]) -> None:
        self._on_register = on_register

    def Register(self, request: api.RegisterRequest, context: grpc.ServicerContext) -> api.Empty:
        if request.version not in SUPPORTED_VERSIONS:
            context.abort(grpc.StatusCode.UNKNOWN, f"Unsupported version {request.version!r}")
        match = _QUALIFIED.match(request.resource_name)
        if not match or match.group("domain").endswith("kubernetes.io"):
            context.abort(grpc.StatusCode.UNKNOWN, f"invalid extended resource name {request.resource_name!r}")
        if not request.endpoint or "/" in request.endpoint:
            context.abort(grpc.StatusCode.UNKNOWN, f"invalid endpoint {request.endpoint!r}")
        self._on_register(request)
        return api.Empty()
