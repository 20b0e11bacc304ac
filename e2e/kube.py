"""The Kubernetes API side of the e2e suite: reachability, workers, pods, logs, namespaces.

Waiting is polling with a deadline; every timeout says what the pod was doing and what its events say,
so a red run explains itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import api_outages
import urllib3
from api_outages import OutageRetry
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from numa_align.fingerprint import SCHEDULER_COUNTED

from numalab.placement.api_objects import kubelet_policies, numa_align_allocatable
from numalab.placement.probe import PROBE_END, ProbeReport, parse_probe_output

POLL_SECONDS = 2.0
REACHABLE_TIMEOUT = 10.0
FATAL_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "RunContainerError"}


class ClusterUnreachable(RuntimeError):
    """The kubeconfig cannot be loaded, or the API server does not answer through it."""


class PodTrouble(AssertionError):
    """A pod did not do what the case needs; the message carries its phase, states and events."""


def connect(kubeconfig: Path) -> client.ApiClient:
    """An API client for the kubeconfig, checked by asking the server for its version."""
    if not kubeconfig.is_file():
        raise ClusterUnreachable(f"kubeconfig {kubeconfig} does not exist")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration,
                                persist_config=False)
    except (config.ConfigException, OSError, ValueError) as exc:
        raise ClusterUnreachable(f"kubeconfig {kubeconfig} cannot be loaded: {exc}") from None
    configuration.retries = False  # one attempt: an absent cluster must stop the run at once
    api = client.ApiClient(configuration)
    try:
        client.VersionApi(api).get_code(_request_timeout=REACHABLE_TIMEOUT)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterUnreachable(
            f"no API server answers at {api.configuration.host} (kubeconfig {kubeconfig}): {exc}"
        ) from None
    except ApiException as exc:
        raise ClusterUnreachable(
            f"API server {api.configuration.host} (kubeconfig {kubeconfig}) refused: {exc.status} {exc.reason}"
        ) from None
    # Reached once: from here a refused connection is an API server restarting, which the cases ride out
    # (and the run reports, api_outages.record) instead of failing every case that follows.
    configuration.retries = OutageRetry()
    return client.ApiClient(configuration)


CREATE_ATTEMPTS = 5


def created(create: Callable[[], Any], read: Callable[[], Any], attempts: int = CREATE_ATTEMPTS) -> None:
    """create() an object whose name is fixed, riding through an API server stopped under the request: a
    POST cut off with no answer, or answered with a storage error (500/504: etcd stopped under the API
    server), may or may not have happened, so the object is read (the retrying client waits for the
    server), and created again only when it is not there. A 409 after such a cut is the first attempt's
    object."""
    for attempt in range(attempts):
        try:
            create()
            return
        except urllib3.exceptions.HTTPError:
            if attempt == attempts - 1:
                raise
        except ApiException as exc:
            if exc.status in OutageRetry.STORAGE_ERRORS and attempt < attempts - 1:
                api_outages.record.add(f"POST answered {exc.status}: {exc.reason}")
            elif exc.status != 409 or attempt == 0:
                raise
            else:
                return
        try:
            read()
            return
        except ApiException as exc:
            if exc.status != 404:
                raise


class Cluster:
    """One namespace's worth of e2e pods on a cluster, plus the node-level reads the cases need."""

    def __init__(self, api: client.ApiClient, namespace: str, pod_timeout: float) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.pod_timeout = pod_timeout
        self.unreachable: str | None = None  # the last log read the apiserver could not proxy to a kubelet

    # --- nodes ---------------------------------------------------------------------------------

    def workers(self) -> dict[str, list[int]]:
        """Nodes that advertise numa-align/numa-N (N with a positive count), with their N, by name."""
        found: dict[str, list[int]] = {}
        for node in self.core.list_node().items:
            counts = numa_align_allocatable(node.status.allocatable or {})
            nodes = sorted(n for n, count in counts.items() if count > 0)
            if nodes:
                found[node.metadata.name] = nodes
        return dict(sorted(found.items()))

    def node(self, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_node(name))

    def configz(self, node: str) -> dict[str, Any]:
        """The kubelet's running configuration, through the API server's node proxy."""
        response = self.core.connect_get_node_proxy_with_path(node, "configz", _preload_content=False,
                                                              _request_timeout=30)
        return json.loads(response.data)

    def policies(self, node: str) -> dict[str, str]:
        return kubelet_policies(self.configz(node))

    # --- namespace -----------------------------------------------------------------------------

    def create_namespace(self) -> None:
        self.core.create_namespace({"metadata": {"name": self.namespace,
                                                 "labels": {"app.kubernetes.io/part-of": "numa-lab-e2e"}}})

    def delete_namespace(self, wait: float = 120.0) -> bool:
        """Delete the namespace and wait until it is gone; False if it is still terminating."""
        try:
            self.core.delete_namespace(self.namespace, propagation_policy="Foreground", grace_period_seconds=0)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return self._gone(lambda: self.core.read_namespace(self.namespace), wait)

    # --- pods ----------------------------------------------------------------------------------

    def create_pods(self, bodies: Iterable[dict[str, Any]]) -> list[str]:
        """All the pods or none: when one create fails, those made before it are deleted (their CPUs would
        starve the cases after it: seen when etcd restarted under a case's set-up)."""
        names: list[str] = []
        for body in bodies:
            name = body["metadata"]["name"]
            try:
                created(lambda body=body: self.core.create_namespaced_pod(self.namespace, body),
                        lambda name=name: self.core.read_namespaced_pod(name, self.namespace))
            except Exception:
                self.delete_pods([*names, name])  # it may be there: a create that failed may have happened
                raise
            names.append(name)
        return names

    def pod(self, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, self.namespace))

    def delete_pods(self, names: Iterable[str], wait: float = 120.0, every: float = POLL_SECONDS) -> None:
        """Delete pods and wait until they are gone (read every `every` s), so their CPUs are free for the next
        case."""
        names = list(names)
        for name in names:
            try:
                self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for name in names:
            if not self._gone(lambda n=name: self.core.read_namespaced_pod(n, self.namespace), wait, every):
                raise PodTrouble(f"pod {self.namespace}/{name} still exists {wait:.0f}s after deletion")

    def bound_pods(self, nodes: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
        """(namespace, name) of every pod bound to each node whose phase is neither Succeeded nor Failed, all
        namespaces: the pods numa-lab's NUMA-aware scheduler counts when it resyncs a node."""
        found: dict[str, list[tuple[str, str]]] = {node: [] for node in nodes}
        for pod in self.core.list_pod_for_all_namespaces(field_selector=SCHEDULER_COUNTED).items:
            if pod.spec.node_name in found:  # one list for every node: the case polls this every 2 s
                found[pod.spec.node_name].append((pod.metadata.namespace, pod.metadata.name))
        return found

    def pods_labelled(self, selector: str) -> list[dict[str, Any]]:
        """The namespace's pods matching a label selector, as dicts."""
        items = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        return [self.api.sanitize_for_serialization(item) for item in items]

    # --- deployments ---------------------------------------------------------------------------

    def create_deployment(self, body: dict[str, Any]) -> str:
        apps, name = client.AppsV1Api(self.api), body["metadata"]["name"]
        created(lambda: apps.create_namespaced_deployment(self.namespace, body),
                lambda: apps.read_namespaced_deployment(name, self.namespace))
        return name

    def delete_deployment(self, name: str, selector: str, wait: float = 120.0) -> None:
        """Delete a Deployment with its ReplicaSets and pods, and wait until its pods are gone."""
        try:
            client.AppsV1Api(self.api).delete_namespaced_deployment(
                name, self.namespace, propagation_policy="Foreground", grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = api_outages.Deadline(wait)
        while self.pods_labelled(selector):
            if deadline.passed():
                raise PodTrouble(f"pods of deployment {self.namespace}/{name} still exist {wait:.0f}s after deletion")
            time.sleep(POLL_SECONDS)

    def events(self, name: str) -> list[str]:
        items = self.core.list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={name}").items
        return [f"{e.type} {e.reason}: {e.message}" for e in items]

    def explain(self, name: str) -> str:
        """Phase, reason, container states and events of a pod, in one paragraph."""
        try:
            pod = self.pod(name)
        except ApiException as exc:
            return f"pod {name}: cannot read it ({exc.status} {exc.reason})"
        status = pod.get("status") or {}
        parts = [f"pod {self.namespace}/{name} phase {status.get('phase')}"]
        if status.get("reason") or status.get("message"):
            parts.append(f"{status.get('reason', '')} {status.get('message', '')}".strip())
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            state = c.get("state") or {}
            for kind, detail in state.items():
                if detail:
                    parts.append(f"{c['name']} {kind} {detail.get('reason', '')} {detail.get('message', '')}".strip())
        events = self.events(name)
        if events:
            parts.append("events: " + "; ".join(events[-5:]))
        return "; ".join(parts)

    def wait_for_probes(self, name: str, containers: Iterable[str]) -> dict[str, ProbeReport]:
        """Wait until every named container printed a complete probe block; return the parsed blocks."""
        wanted = list(containers)
        logs: dict[str, ProbeReport] = {}
        self.unreachable = None  # a refusal seen while waiting for another pod is not this one's
        deadline = api_outages.Deadline(self.pod_timeout)
        while True:
            pod = self.pod(name)
            status = pod.get("status") or {}
            self._fail_fast(name, status)
            for container in wanted:
                if container not in logs:
                    text = self._log(name, container)
                    if text and PROBE_END in text:
                        logs[container] = parse_probe_output(text)
            if len(logs) == len(wanted):
                return logs
            if status.get("phase") in ("Failed", "Succeeded"):
                raise PodTrouble(f"probe output missing for {sorted(set(wanted) - set(logs))}: {self.explain(name)}")
            if deadline.passed():
                seen = f" (last log read: {self.unreachable})" if self.unreachable else ""
                raise PodTrouble(f"no probe output after {deadline.describe()}{seen}: {self.explain(name)}")
            time.sleep(POLL_SECONDS)

    def wait_until(self, name: str, judge: Callable[[dict[str, Any]], tuple[bool | None, str]],
                   timeout: float | None = None, every: float = POLL_SECONDS) -> tuple[bool, str]:
        """Poll a pod every `every` s until judge(pod) returns a definite answer; a timeout is a failure."""
        limit = self.pod_timeout if timeout is None else timeout
        deadline = api_outages.Deadline(limit)
        while True:
            verdict, why = judge(self.pod(name))
            if verdict is not None:
                return verdict, why
            if deadline.passed():
                return False, f"undecided after {deadline.describe()} ({why}): {self.explain(name)}"
            time.sleep(every)

    def _fail_fast(self, name: str, status: dict[str, Any]) -> None:
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (c.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FATAL_WAITING:
                raise PodTrouble(f"container {c['name']} cannot start ({waiting.get('reason')}: "
                                 f"{waiting.get('message', '')}); check --probe-image. {self.explain(name)}")

    def log(self, name: str, container: str) -> str | None:
        """A container's log, or None while it cannot be read yet (not started, kubelet unreachable)."""
        return self._log(name, container)

    def _log(self, name: str, container: str) -> str | None:
        try:
            return self.core.read_namespaced_pod_log(name, self.namespace, container=container)
        except ApiException as exc:
            if exc.status in (400, 404):  # not started yet
                return None
            if exc.status is not None and exc.status >= 500:
                # The apiserver could not reach the node's kubelet (restarting, or its port not up yet):
                # not a verdict on the pod; asked again until the pod's deadline, which names it.
                self.unreachable = f"{exc.status} {(exc.body or exc.reason or '').strip()[:300]}"
                return None
            raise

    @staticmethod
    def _gone(read: Callable[[], Any], wait: float, every: float = POLL_SECONDS) -> bool:
        deadline = api_outages.Deadline(wait)
        while not deadline.passed():
            try:
                read()
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            time.sleep(every)
        return False
