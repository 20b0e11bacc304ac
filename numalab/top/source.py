"""The API side of `numalab top`: which kubeconfig, and the lists it reads (NRT objects, Nodes, Pods, and
numa-align's Leases, which say whether each object is still vouched for).

Every failure becomes a `TopError` with one line that names the kubeconfig or the server and says what to
do, because the command's only job is to show a cluster: a traceback would hide that the cluster is absent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from numa_align.leases import NAMESPACE as LEASE_NAMESPACE
from numa_align.nrt_api import CRD_NAME, GROUP, PLURAL, VERSION

from numalab.lab.settings import settings_from_env

REQUEST_TIMEOUT = 15.0
CRD_MISSING = f"the NodeResourceTopology CRD ({CRD_NAME}) is not installed: deploy with numa_align_nrt on"


class TopError(RuntimeError):
    """The cluster cannot be read: printed as one line, exit 2."""


class Source(Protocol):
    """What the command reads; the API reader below, or a fake in tests. Objects are API-shaped dicts."""

    def nrts(self) -> list[dict[str, Any]]: ...

    def nodes(self) -> list[dict[str, Any]]: ...

    def pods(self, node: str | None) -> list[dict[str, Any]]: ...

    def leases(self) -> list[dict[str, Any]] | None: ...


def default_kubeconfig(environ: Mapping[str, str] | None = None) -> str:
    """$KUBECONFIG, else the lab's (the state dir of $NUMALAB_NAME, as `numalab lab` and `make e2e` use)."""
    environ = os.environ if environ is None else environ
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"]
    return str(settings_from_env(environ).state_dir.expanduser() / "kubeconfig")


def connect(kubeconfig: str, context: str | None = None) -> client.ApiClient:
    """An API client for the kubeconfig (a path, or a $KUBECONFIG-style list); no request is made yet."""
    paths = [Path(part).expanduser() for part in kubeconfig.split(os.pathsep) if part]
    if not any(path.is_file() for path in paths):
        raise TopError(f"kubeconfig {kubeconfig} does not exist (give --kubeconfig or set KUBECONFIG; "
                       "the lab writes its own into its state dir)")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration,
                                persist_config=False)
    except Exception as exc:  # the loader raises OSError, YAMLError, TypeError, ConfigException... for bad files
        raise TopError(f"kubeconfig {kubeconfig} cannot be loaded: {' '.join(str(exc).split())}") from None
    configuration.retries = False  # one attempt: an absent cluster must say so at once
    return client.ApiClient(configuration)


class ApiSource:
    """Reads through the kubernetes client; `where` (server and kubeconfig) goes into every error."""

    def __init__(self, custom: Any, core: Any, where: str, to_dict: Callable[[Any], Any] = lambda obj: obj,
                 coordination: Any = None) -> None:
        self.custom = custom
        self.core = core
        self.coordination = coordination
        self.where = where
        self.to_dict = to_dict

    @classmethod
    def from_client(cls, api: client.ApiClient, kubeconfig: str) -> ApiSource:
        where = f"{api.configuration.host} (kubeconfig {kubeconfig})"
        return cls(client.CustomObjectsApi(api), client.CoreV1Api(api), where, api.sanitize_for_serialization,
                   client.CoordinationV1Api(api))

    def nrts(self) -> list[dict[str, Any]]:
        found = self._call("list NodeResourceTopology objects", self.custom.list_cluster_custom_object,
                           GROUP, VERSION, PLURAL, missing=CRD_MISSING)
        return list(found.get("items") or [])

    def nodes(self) -> list[dict[str, Any]]:
        found = self._call("list nodes", self.core.list_node)
        return [self.to_dict(item) for item in found.items or []]

    def pods(self, node: str | None) -> list[dict[str, Any]]:
        selector = {"field_selector": f"spec.nodeName={node}"} if node else {}
        found = self._call("list pods", self.core.list_pod_for_all_namespaces, **selector)
        return [self.to_dict(item) for item in found.items or []]

    def leases(self) -> list[dict[str, Any]] | None:
        """numa-align's Leases; None when they cannot be read (the user may not: staleness is then unknown)."""
        try:
            found = self._call("list leases", self.coordination.list_namespaced_lease, LEASE_NAMESPACE,
                               label_selector="app.kubernetes.io/name=numa-align")
        except TopError:
            return None
        return [self.to_dict(item) for item in found.items or []]

    def _call(self, what: str, method: Callable[..., Any], *args: Any, missing: str | None = None,
              **kwargs: Any) -> Any:
        try:
            return method(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status == 404 and missing:
                raise TopError(missing) from None
            if not exc.status:  # the client's own failure (no answer, TLS), not the server's
                raise TopError(f"no API server answers at {self.where}: {exc.reason}") from None
            raise TopError(f"API server {self.where} refused to {what}: {exc.status} {exc.reason}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TopError(f"no API server answers at {self.where}: {' '.join(str(exc).split())}") from None


def read_cluster(source: Source, node: str | None = None) -> tuple[list[dict[str, Any]], ...]:
    """(NRT objects, Nodes, Pods): the NRTs first, so a missing CRD is the error a user sees."""
    return source.nrts(), source.nodes(), source.pods(node)
