"""The policy-change reset's calls to the cluster's API, from the controller, run by `python.call` operations:
take the node (cordon and mark it, unless another node is under reset or pods the drain may not evict run on
it), evict its pods through the Eviction API so PodDisruptionBudgets hold, and end the reset (uncordon,
unmark) once it is Ready. Every refusal raises, so the operations after the drain (stop the kubelet, remove
its checkpoints) never run on that host: an API that does not answer is a refusal, never "nothing to drain".

The rules are numalab.model.node_reset's. Taking the node is a check-then-patch; a file lock in the state
dir makes it atomic for every pyinfra run on this controller (numalab.files: greenlet-safe).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from numalab.deploy import api
from numalab.files import file_lock
from numalab.model.node_reset import (
    MARK,
    NO_OPT_IN,
    DrainOptions,
    ResetError,
    blocked_message,
    budgets_of,
    check_evictable,
    holder,
    mark_patch,
    pods_to_evict,
    release_patch,
    unreachable_message,
)

DRAIN_TIMEOUT = 300.0
"""Seconds the evictions (retried while a budget refuses) and the pods' termination may take together."""
RETRY_SECONDS = 5.0
REQUEST_TIMEOUT = 10


def lock_path(kubeconfig: Path) -> Path:
    """The lock beside the admin kubeconfig: one per cluster on this controller."""
    return kubeconfig.parent / "policy-reset.lock"


def take(kubeconfig: Path, node: str, options: DrainOptions = NO_OPT_IN) -> bool:
    """Cordon and mark `node` for its reset; False when the API answers that it has no such Node (a first join:
    nothing to drain). Refused, naming it and changing nothing, when the API does not answer, while another
    node is under reset, or while pods run on it that `options` do not let the drain evict."""
    with file_lock(lock_path(kubeconfig)):
        try:
            core = api.core_api(kubeconfig)
            nodes = core.list_node(_request_timeout=REQUEST_TIMEOUT).items
            other = holder(nodes, node)
            if other is not None:
                raise ResetError(f"{node}: its policy-change reset waits for node {other}'s (one node at a time; "
                                 f"{other} carries {MARK} until it is Ready and uncordoned): run again once it is")
            target = next((item for item in nodes if item.metadata.name == node), None)
            if target is None:
                return False
            check_evictable(node, _pods_on(core, node), options, cordoned=False)
            core.patch_node(node, mark_patch(target), _request_timeout=REQUEST_TIMEOUT)
        except api.Problem as exc:
            raise ResetError(unreachable_message(node, api.problem_text(exc), kubeconfig)) from None
        return True


def drain(kubeconfig: Path, node: str, options: DrainOptions = NO_OPT_IN, timeout: float = DRAIN_TIMEOUT,
          retry: float = RETRY_SECONDS) -> None:
    """Take `node`, evict its pods and wait until they are gone."""
    if take(kubeconfig, node, options):
        evict_pods(api.core_api(kubeconfig), node, options, timeout, retry)


def _pods_on(core: client.CoreV1Api, node: str) -> list[Any]:
    return core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}",
                                            _request_timeout=REQUEST_TIMEOUT).items


def evict_pods(core: client.CoreV1Api, node: str, options: DrainOptions, timeout: float, retry: float) -> None:
    """Evict every pod `node` must give up, retrying those a budget holds back (429) until `timeout`. The pods
    are checked again once it is cordoned: a pod bound to it meanwhile would bypass the check in take()."""
    pods = _pods_on(core, node)
    check_evictable(node, pods, options, cordoned=True)
    evicted = pods_to_evict(pods)
    deadline = time.monotonic() + timeout
    pending = evicted
    while pending:
        pending = [pod for pod in pending if not _evict(core, pod)]
        if pending and time.monotonic() >= deadline:
            raise ResetError(blocked_message(node, pending[0], _budgets(core, pending[0]), timeout))
        if pending:
            time.sleep(retry)
    uids = {pod.metadata.uid for pod in evicted}
    while uids:
        uids &= {pod.metadata.uid for pod in _pods_on(core, node)}
        if uids and time.monotonic() >= deadline:
            left = sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in evicted if p.metadata.uid in uids)
            raise ResetError(f"drain {node}: evicted pods still there after {timeout:.0f} s: {', '.join(left)}")
        if uids:
            time.sleep(min(retry, 2.0))


def _evict(core: client.CoreV1Api, pod: Any) -> bool:
    """Ask for the pod's eviction: True when granted (or the pod is gone), False when refused with 429."""
    name, namespace = pod.metadata.name, pod.metadata.namespace
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    try:
        core.create_namespaced_pod_eviction(name, namespace, body, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 429:
            return False
        if exc.status != 404:
            raise
    return True


def _budgets(core: client.CoreV1Api, pod: Any) -> list[str]:
    policy = client.PolicyV1Api(core.api_client)
    listed = policy.list_namespaced_pod_disruption_budget(pod.metadata.namespace, _request_timeout=REQUEST_TIMEOUT)
    return budgets_of(pod, listed.items)


def release(kubeconfig: Path, node: str) -> None:
    """End the reset of `node`: uncordon it (if numa-lab cordoned it) and unmark it, once it is Ready."""
    core = api.core_api(kubeconfig)
    current = core.read_node(node, _request_timeout=REQUEST_TIMEOUT)
    patch = release_patch(current, api.node_is_ready(current))
    if patch is not None:
        core.patch_node(node, patch, _request_timeout=REQUEST_TIMEOUT)
