"""The fleet's calls to the API server over the official client's ApiClient, raw JSON in and out.

The driver's calls (`FleetApi`: Nodes, NodeResourceTopology objects, the bound pods' list, watch and status) and
the bench's (create the workload, list and watch its pods, delete it). The generated model classes' validation
would cost more than the simulation at hundreds of writes a second, so objects are API-shaped dicts. Size the
client's `connection_pool_maxsize` to the threads that share it (`api_client`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.rest import ApiException
from numa_align.nrt_api import GROUP, PLURAL, VERSION

BOUND = "spec.nodeName!="
NRT_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
LIST_CHUNK = 500
COLLECTIONS = {"Pod": "/api/v1/namespaces/{}/pods", "Deployment": "/apis/apps/v1/namespaces/{}/deployments",
               "ReplicaSet": "/apis/apps/v1/namespaces/{}/replicasets", "Namespace": "/api/v1/namespaces"}
"""Kind -> its collection (namespaced but for Namespace): what the bench creates and deletes."""


class ApiError(Exception):
    """A request the API server refused (status) or that got no answer (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status


class Expired(ApiError):
    """The watch's resourceVersion is too old (410): list again."""


def api_client(kubeconfig: Path, connections: int = 16) -> Any:
    """An ApiClient for `kubeconfig` whose pool keeps `connections` open (one per thread that shares it)."""
    from kubernetes import client, config  # loaded only when a plane runs

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)


class KubeFleetApi:
    """The driver's FleetApi and the bench's calls over one ApiClient."""

    def __init__(self, api_client: Any, timeout: float = 30.0, watch_seconds: int = 240) -> None:
        self.client, self.timeout, self.watch_seconds = api_client, timeout, watch_seconds
        self._watching: Any = None

    def _call(self, method: str, path: str, body: Any = None, query: Sequence[tuple[str, str]] = (),
              content_type: str = "application/json", stream: bool = False, timeout: float | None = None) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self.client.param_serialize(method, path, query_params=list(query), header_params=headers,
                                              body=body, auth_settings=["BearerToken"])
        wait = timeout or self.timeout
        try:
            response = self.client.call_api(*request, _request_timeout=(wait, self.watch_seconds + wait)
                                            if stream else wait)
        except ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, " ".join(str(exc).split())) from None
        if stream and 200 <= response.status < 300:
            return response.response
        data = response.read()
        response.response.release_conn()
        answer = json.loads(data) if data.startswith(b"{") else {"message": data[:200].decode(errors="replace")}
        if not 200 <= response.status < 300:
            raise ApiError(response.status, str(answer.get("message")))
        return answer

    # -- the driver's ----------------------------------------------------------------------------------

    def create_node(self, node: dict[str, Any]) -> str:
        try:
            return self._call("POST", "/api/v1/nodes", node)["metadata"]["uid"]
        except ApiError as exc:
            if exc.status != 409:
                raise
        return self._call("GET", f"/api/v1/nodes/{node['metadata']['name']}")["metadata"]["uid"]

    def put_nrt(self, nrt: dict[str, Any]) -> None:
        try:
            self._call("POST", NRT_PATH, nrt)
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.patch_nrt(nrt)

    def patch_nrt(self, nrt: dict[str, Any]) -> None:
        """A merge patch of everything numa-align writes (lists are replaced whole): no read, no conflict."""
        metadata = nrt["metadata"]
        body = {"metadata": {k: metadata[k] for k in ("annotations", "ownerReferences") if k in metadata},
                "zones": nrt["zones"], "attributes": nrt["attributes"]}
        try:
            self._call("PATCH", f"{NRT_PATH}/{metadata['name']}", body, content_type=MERGE_PATCH)
        except ApiError as exc:
            if exc.status != 404:
                raise
            self._call("POST", NRT_PATH, nrt)  # deleted meanwhile (the garbage collector, a person): again

    def annotate_nrt(self, name: str, key: str, value: str) -> None:
        """Set one annotation of an object (a merge patch: numa-align's own annotations stay)."""
        self._call("PATCH", f"{NRT_PATH}/{name}", {"metadata": {"annotations": {key: value}}},
                   content_type=MERGE_PATCH)

    def get_nrt(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"{NRT_PATH}/{name}")

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", patch, content_type=STRATEGIC_PATCH)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        self._call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", options)

    def list_bound_pods(self) -> tuple[list[dict[str, Any]], str]:
        return self.list_pods(field_selector=BOUND)

    def watch_bound_pods(self, resource_version: str) -> Iterator[tuple[str, dict[str, Any]]]:
        return self.watch_pods(resource_version, field_selector=BOUND)

    def interrupt(self) -> None:
        """End the watch under way (from another thread)."""
        response = self._watching
        if response is None:
            return
        try:
            getattr(response, "shutdown", response.close)()
        except OSError:  # the watch ended and closed its socket between the read above and this call
            pass

    # -- pods, listed and watched: the driver's bound ones, the bench's by label -------------------------------

    def list_pods(self, namespace: str | None = None, *, field_selector: str = "",
                  label_selector: str = "") -> tuple[list[dict[str, Any]], str]:
        """Every pod matching, in pages; (pods, the list's resourceVersion)."""
        return self._list(_pods(namespace), _selectors(field_selector, label_selector))

    def ready_nodes(self) -> int:
        """Nodes whose Ready condition is True."""
        nodes, _ = self._list("/api/v1/nodes", [])
        return sum(1 for node in nodes for condition in (node.get("status") or {}).get("conditions") or []
                   if condition.get("type") == "Ready" and condition.get("status") == "True")

    def _list(self, path: str, selectors: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        query = [*selectors, ("limit", str(LIST_CHUNK))]
        while True:
            page = self._call("GET", path, query=query)
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, str((page.get("metadata") or {}).get("resourceVersion") or "")
            query = [*selectors, ("limit", str(LIST_CHUNK)), ("continue", token)]

    def watch_pods(self, resource_version: str, namespace: str | None = None, *, field_selector: str = "",
                   label_selector: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, pod) from `resource_version` on, bookmarks included, until the server ends the watch or
        `interrupt()`; Expired when the version is too old."""
        query = [*_selectors(field_selector, label_selector), ("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("resourceVersion", resource_version), ("timeoutSeconds", str(self.watch_seconds))]
        self._watching = response = self._call("GET", _pods(namespace), query=query, stream=True)
        try:
            for line in response:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise (Expired if obj.get("code") == 410 else ApiError)(int(obj.get("code") or 0),
                                                                            str(obj.get("message")))
                yield str(kind), obj
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise ApiError(0, f"watch ended: {' '.join(str(exc).split())}") from None
        finally:
            self._watching = None
            response.release_conn()

    # -- the bench's workload ------------------------------------------------------------------------------

    def create(self, obj: Mapping[str, Any]) -> None:
        """Create a Pod or Deployment in its namespace, or a Namespace."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
        self._call("POST", COLLECTIONS[str(obj["kind"])].format(namespace), obj)


def _pods(namespace: str | None) -> str:
    return COLLECTIONS["Pod"].format(namespace) if namespace else "/api/v1/pods"


def _selectors(field_selector: str, label_selector: str) -> list[tuple[str, str]]:
    return [*([("fieldSelector", field_selector)] if field_selector else []),
            *([("labelSelector", label_selector)] if label_selector else [])]
