"""The API reads of explain: numalab.top's reader (NRT objects, Nodes, Pods, Leases) and each kubelet's
/configz through the API server's node proxy, which says the manager policies and options the object lacks."""

from __future__ import annotations

import json
from typing import Any, Protocol

from kubernetes.client.rest import ApiException

from numalab.top.source import REQUEST_TIMEOUT, ApiSource, Source, connect


class ExplainSource(Source, Protocol):
    def kubelet_config(self, node: str) -> dict[str, Any] | None: ...


class ApiExplainSource(ApiSource):
    def kubelet_config(self, node: str) -> dict[str, Any] | None:
        """The kubelet's configuration from its /configz; None when it cannot be read (no nodes/proxy right,
        kubelet down): the verdicts then say what is unknown."""
        try:
            response = self.core.connect_get_node_proxy_with_path(node, "configz", _preload_content=False,
                                                                  _request_timeout=REQUEST_TIMEOUT)
            config = json.loads(response.data).get("kubeletconfig")
        except (ApiException, OSError, ValueError, AttributeError):
            return None
        return config if isinstance(config, dict) else None


def open_source(kubeconfig: str, context: str | None) -> ExplainSource:
    """The API reader for the kubeconfig; tests replace this to serve fake objects."""
    return ApiExplainSource.from_client(connect(kubeconfig, context), kubeconfig)  # type: ignore[return-value]
