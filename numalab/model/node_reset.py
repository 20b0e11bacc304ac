"""The rules of a policy-change reset, without I/O: which node may start one, which pods it evicts, which
pods it refuses to evict unless host data opts in, which budget holds a pod back, and how it ends.
numalab.deploy.draining applies them through the API.

It fails closed: the kubelet is stopped only on a node drained through the Eviction API. An API that does not
answer, or pods a drain would lose for good (no controller re-creates them; emptyDir data), stop the reset
before the node is cordoned, as `kubectl drain` does without `--force` / `--delete-emptydir-data`.

A node under reset carries MARK from its cordon until it is Ready and uncordoned again, also after a failed
run: so the next run knows to finish it (the new config is already written and plans no reset), and no
other node's reset starts while it is cordoned. The mark's value says whether numa-lab cordoned the node
(CORDONED) or found it cordoned already (KEPT), so only numa-lab's own cordon is lifted.

Objects are the kubernetes client's models (V1Node, V1Pod, V1PodDisruptionBudget), read by attribute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MARK = "numa-lab/cordoned-for-policy-change"
CORDONED = "true"
KEPT = "already-cordoned"
MIRROR = "kubernetes.io/config.mirror"
FORCE_KEY = "drain_force"
EMPTYDIR_KEY = "drain_delete_emptydir_data"
FINISHED = ("Succeeded", "Failed")


class ResetError(RuntimeError):
    """The reset cannot go on; the message names the node, pod or budget and what to do next."""


@dataclass(frozen=True)
class DrainOptions:
    """What a drain may evict beyond pods a controller re-creates elsewhere (host data, named as kubectl drain's
    flags): `force` (FORCE_KEY, --force) pods no controller owns, gone for good once evicted;
    `delete_emptydir_data` (EMPTYDIR_KEY, --delete-emptydir-data) pods whose emptyDir data is then lost."""

    force: bool = False
    delete_emptydir_data: bool = False


NO_OPT_IN = DrainOptions()
"""kubectl drain's default: refuse both."""


def unreachable_message(node: str, problem: str, kubeconfig: object) -> str:
    """Why a reset stops when the API does not answer (it could not drain the node), and what to do."""
    return (f"{node}: its policy-change reset needs the cluster's API to drain it, and the API did not answer "
            f"({problem}): nothing was changed on {node} (its kubelet is not stopped while its pods may run); "
            f"bring the API server back (kubeconfig {kubeconfig}) and run again")


def mark_of(node: Any | None) -> str | None:
    """MARK's value on `node`, or None (no node, or not under reset)."""
    if node is None or node.metadata is None:
        return None
    return (node.metadata.annotations or {}).get(MARK)


def holder(nodes: Iterable[Any], name: str) -> str | None:
    """Another node under reset, which keeps `name` from starting its own; None when there is none."""
    others = sorted(node.metadata.name for node in nodes if node.metadata.name != name and mark_of(node))
    return others[0] if others else None


def mark_patch(node: Any) -> dict:
    """Cordon `node` and mark it, keeping a mark an earlier run left (a cordon numa-lab did not make stays)."""
    value = mark_of(node) or (KEPT if node.spec is not None and node.spec.unschedulable else CORDONED)
    return {"metadata": {"annotations": {MARK: value}}, "spec": {"unschedulable": True}}


def release_planned(stale: Sequence[str], node: Any | None) -> bool:
    """End a reset in this run: the one this run makes (`stale` files), or one a failed run left marked."""
    return bool(stale) or mark_of(node) is not None


def release_patch(node: Any, ready: bool) -> dict | None:
    """The patch that ends the reset of `node` (None: not under reset); refused while it is not Ready."""
    value = mark_of(node)
    if value is None:
        return None
    name = node.metadata.name
    if not ready:
        raise ResetError(f"node {name} is not Ready: it stays cordoned (annotation {MARK}) and the next run "
                         f"uncordons it once it is Ready; see the kubelet's journal on {name} "
                         "(`journalctl -u kubelet`, or rke2-agent / rke2-server)")
    patch: dict = {"metadata": {"annotations": {MARK: None}}}
    if value == CORDONED:
        patch["spec"] = {"unschedulable": False}
    return patch


def pods_to_evict(pods: Iterable[Any]) -> list[Any]:
    """The node's pods but DaemonSet pods (their controller ignores the cordon) and mirror pods (the kubelet's
    static pods: the API cannot move them)."""
    return [
        pod for pod in pods
        if not any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references or [])
        and MIRROR not in (pod.metadata.annotations or {})
    ]


def _bare(pod: Any) -> bool:
    return not any(ref.controller for ref in pod.metadata.owner_references or [])


def _emptydir(pod: Any) -> bool:
    return any(volume.empty_dir is not None for volume in (pod.spec.volumes if pod.spec else None) or [])


def _losable(pod: Any) -> bool:
    """A pod an eviction would take from its user: still to run (not finished) and not being deleted already."""
    return (pod.status is None or pod.status.phase not in FINISHED) and pod.metadata.deletion_timestamp is None


def refused_pods(pods: Iterable[Any], options: DrainOptions) -> tuple[list[str], list[str]]:
    """`namespace/name` of the pods to evict that `options` do not allow: (bare pods, pods with emptyDir data)."""
    losable = [pod for pod in pods_to_evict(pods) if _losable(pod)]
    names = [(f"{pod.metadata.namespace}/{pod.metadata.name}", pod) for pod in losable]
    return (sorted(name for name, pod in names if _bare(pod) and not options.force),
            sorted(name for name, pod in names if _emptydir(pod) and not options.delete_emptydir_data))


def check_evictable(node: str, pods: Iterable[Any], options: DrainOptions, cordoned: bool) -> None:
    """Refuse the drain of `node`, naming every pod it would lose and the host data key that allows it."""
    bare, emptydir = refused_pods(pods, options)
    if not bare and not emptydir:
        return
    why = []
    if bare:
        why.append(f"no controller re-creates {', '.join(bare)} (evicted, gone for good; "
                   f"{FORCE_KEY}: true in {node}'s host data evicts them)")
    if emptydir:
        why.append(f"{', '.join(emptydir)} keep emptyDir data (lost on eviction; "
                   f"{EMPTYDIR_KEY}: true in {node}'s host data evicts them)")
    state = (f"{node} stays cordoned and marked {MARK} until a run finishes its reset" if cordoned
             else f"nothing was changed on {node} (not cordoned)")
    raise ResetError(f"drain {node} refused: {'; '.join(why)}; {state}: move or delete those pods, or opt in, "
                     "then run again")


_OPERATORS = {
    "In": lambda present, value, values: present and value in values,
    "NotIn": lambda present, value, values: not present or value not in values,
    "Exists": lambda present, value, values: present,
    "DoesNotExist": lambda present, value, values: not present,
}


def selects(selector: Any | None, labels: dict[str, str]) -> bool:
    """A label selector as policy/v1 budgets use it: none selects no pod, an empty one every pod."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.match_labels or {}).items()):
        return False
    return all(_OPERATORS[expr.operator](expr.key in labels, labels.get(expr.key), expr.values or [])
               for expr in selector.match_expressions or [])


def budgets_of(pod: Any, budgets: Iterable[Any]) -> list[str]:
    """The names of the PodDisruptionBudgets in the pod's namespace that select it."""
    namespace, labels = pod.metadata.namespace, pod.metadata.labels or {}
    return sorted(budget.metadata.name for budget in budgets
                  if budget.metadata.namespace == namespace and selects(budget.spec and budget.spec.selector, labels))


def blocked_message(node: str, pod: Any, budgets: Sequence[str], timeout: float) -> str:
    """Why the drain of `node` gave up on `pod`, naming the budget that held it back."""
    where = f"{pod.metadata.namespace}/{pod.metadata.name}"
    if budgets:
        why = (f"its PodDisruptionBudget {', '.join(budgets)} allows no disruption; give the workload room "
               "(more replicas, or a looser budget)")
    else:
        why = "the API server answered 429 (too many requests) and no PodDisruptionBudget selects it"
    return (f"drain {node}: pod {where} not evicted after {timeout:.0f} s: {why}, then run again "
            f"({node} stays cordoned and marked {MARK} until a run finishes its reset)")
