"""The few Kubernetes API requests publishing the NRT object needs, on the standard library's HTTP client.

Get a Node (for its uid: the NRT object's owner); get, create and replace a cluster-scoped
NodeResourceTopology and this node's Lease; list the node's Running pods (whole, for the cpuset auditor: the
pod fingerprint needs no list, it covers every pod the kubelet lists); create an Event.
Every request has a timeout. Failures are typed and say what to do: `Unreachable` names the server address,
`ApiError` carries the status, `CrdMissing` says the CRD is not installed, a 401 or 403 names the credentials
and the right missing.

One connection is kept open and reused (HTTP/1.1 keep-alive): a TLS handshake per request cost more CPU than
the request on an emulated node, and the API server keeps idle connections open far longer than the poll.
A request that fails on a reused connection before any answer (the server closed it while idle) is sent
once more on a new one; any other failure closes the connection and the next request opens a new one. The
client is not thread-safe: the NRT publisher's thread is its only user.

The API server answers 404 both for an absent object and for a path it does not serve. An absent object
comes with a Status naming it (details.name); anything else under the NRT path means the resource itself
is not served: the CRD is missing, not yet established, or serves no v1alpha2.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any
from urllib.parse import quote, urlsplit

from numa_align import __version__
from numa_align.kubeconfig import ClusterConfig
from numa_align.nrt_api import CRD_NAME, GROUP, PLURAL, VERSION

TIMEOUT = 10.0
"""Seconds for each request (connect, send, answer)."""
NRT_RESOURCE = CRD_NAME
NRT_COLLECTION = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
NODE_RESOURCE = "nodes"
POD_RESOURCE = "pods"
LEASE_RESOURCE = "leases.coordination.k8s.io"
EVENT_RESOURCE = "events"
_VERBS = {"GET": "get", "POST": "create", "PUT": "update"}


class KubeApiError(RuntimeError):
    """A request did not succeed; str() says what and where to look."""


class Unreachable(KubeApiError):
    """No HTTP answer: connection refused, timeout, name not resolved, TLS verification failed."""


class ApiError(KubeApiError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """The object does not exist (its resource is served)."""


class CrdMissing(ApiError):
    """The API server does not serve NodeResourceTopology objects: the CRD is not installed."""


class KubeClient:
    """Requests to one API server with one configuration; raises ConfigError at once if its TLS setup is bad."""

    def __init__(self, config: ClusterConfig, timeout: float = TIMEOUT) -> None:
        self.config = config
        self.timeout = timeout
        url = urlsplit(config.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._context = config.ssl_context() if self._https else None
        self._connection: http.client.HTTPConnection | None = None

    @property
    def server(self) -> str:
        return self.config.server

    def get_node(self, name: str) -> dict[str, Any]:
        return self._request("GET", f"/api/v1/nodes/{quote(name)}", NODE_RESOURCE, name)

    def get_nrt(self, name: str, cached: bool = False) -> dict[str, Any]:
        """The stored object; `cached`: from the API server's watch cache (no etcd read, a moment behind)."""
        query = "?resourceVersion=0" if cached else ""
        return self._request("GET", f"{NRT_COLLECTION}/{quote(name)}{query}", NRT_RESOURCE, name)

    def create_nrt(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", NRT_COLLECTION, NRT_RESOURCE, body["metadata"]["name"], body)

    def update_nrt(self, body: dict[str, Any]) -> dict[str, Any]:
        """Replace the object; body's metadata.resourceVersion must be the stored one (409 otherwise)."""
        name = body["metadata"]["name"]
        return self._request("PUT", f"{NRT_COLLECTION}/{quote(name)}", NRT_RESOURCE, name, body)

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return self._request("GET", _lease_path(namespace, name), LEASE_RESOURCE, name)

    def create_lease(self, body: dict[str, Any]) -> dict[str, Any]:
        metadata = body["metadata"]
        return self._request("POST", _lease_path(metadata["namespace"]), LEASE_RESOURCE, metadata["name"], body)

    def update_lease(self, body: dict[str, Any]) -> dict[str, Any]:
        """Replace the Lease; body's metadata.resourceVersion must be the stored one (409 otherwise)."""
        metadata = body["metadata"]
        return self._request("PUT", _lease_path(metadata["namespace"], metadata["name"]), LEASE_RESOURCE,
                             metadata["name"], body)

    def create_event(self, body: dict[str, Any]) -> dict[str, Any]:
        """A core/v1 Event in body's metadata.namespace (409 when one of its name exists)."""
        metadata = body["metadata"]
        return self._request("POST", f"/api/v1/namespaces/{quote(metadata['namespace'])}/events", EVENT_RESOURCE,
                             metadata["name"], body)

    def running_pod_objects(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to `node` whose phase is Running, whole (status included: uid and container ids name
        their cgroups), from the API server's watch cache (resourceVersion=0: no etcd read; a moment behind at
        worst), for the auditor, which asks only when a pinned container's cgroup is not known yet (auditing.py)."""
        selector = quote(f"spec.nodeName={node},status.phase=Running", safe="")
        answer = self._request("GET", f"/api/v1/pods?fieldSelector={selector}&resourceVersion=0", POD_RESOURCE,
                               node, verb="list")
        return list(answer.get("items") or [])

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _request(self, method: str, path: str, resource: str, name: str, body: dict[str, Any] | None = None, *,
                 verb: str | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json", "User-Agent": f"numa-align/{__version__}"}
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            status, raw = self._exchange(method, self._prefix + path, data, headers)
        except ssl.SSLCertVerificationError as exc:
            raise Unreachable(f"the API server at {self.server} has a certificate that does not verify "
                              f"({exc.verify_message}; {self.config.source})") from None
        except TimeoutError:
            raise Unreachable(f"the API server at {self.server} did not answer within {self.timeout:g} s "
                              f"({self.config.source})") from None
        except (OSError, http.client.HTTPException) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            raise Unreachable(f"cannot reach the API server at {self.server}: {why} ({self.config.source})") from None
        if 200 <= status < 300:
            try:
                return json.loads(raw)
            except ValueError:
                raise ApiError(status, "BadAnswer", f"{method} {path} answered what is not JSON") from None
        raise self._error(method, path, resource, name, status, raw, verb)

    def _exchange(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        """Send on the kept connection (opened when there is none); once more on a new one when a reused
        connection was closed by the server while idle. Any failure leaves no connection behind."""
        for attempt in (1, 2):
            reused = self._connection is not None
            connection = self._connection or self._open()
            self._connection = connection
            try:
                connection.request(method, url, body=data, headers=headers)
                response = connection.getresponse()
                status, raw = response.status, response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                self.close()
                if reused and attempt == 1:
                    continue
                raise
            except BaseException:
                self.close()
                raise
            if response.will_close:
                self.close()
            return status, raw
        raise AssertionError("unreachable")  # the loop returns or raises

    def _open(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def _error(self, method: str, path: str, resource: str, name: str, status: int, raw: bytes,
               verb: str | None = None) -> ApiError:
        answer = _status(raw)
        reason = str(answer.get("reason") or http.client.responses.get(status, "Error"))
        said = str(answer.get("message") or raw[:200].decode(errors="replace").strip() or "no message")
        verb = verb or _VERBS.get(method, method)
        if status == 404 and resource == NRT_RESOURCE and not (answer.get("details") or {}).get("name"):
            return CrdMissing(status, reason, f"the API server at {self.server} does not serve {NRT_COLLECTION}: "
                                              f"the NodeResourceTopology CRD ({NRT_RESOURCE}) is not installed")
        if status == 404:
            return NotFound(status, reason, f"{resource} {name!r} not found at {self.server}: {said}")
        if status == 401:
            return ApiError(status, reason, f"the API server at {self.server} did not accept "
                                            f"{self.config.credentials}: {said}")
        if status == 403:
            return ApiError(status, reason, f"{self.config.credentials} may not {verb} {resource}: {said}; "
                                            f"grant '{verb}' on {resource} (a ClusterRole bound to it)")
        return ApiError(status, reason, f"{method} {self.server}{path}: {said}")


def _lease_path(namespace: str, name: str | None = None) -> str:
    collection = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
    return collection if name is None else f"{collection}/{quote(name)}"


def _status(raw: bytes) -> dict[str, Any]:
    """The Status object of an error answer, or {} when the answer is not one (plain text, HTML)."""
    try:
        answer = json.loads(raw)
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) and answer.get("kind") == "Status" else {}
