"""The cluster test's fault cases on the NUMA-aware scheduler's cache: a pod stuck Pending on a node, and a
Node deleted and registered again; each tells, from numa-scheduler's journal, how the cache took the node's
object back (numa-lab's adopter or upstream's resync). Rows go to faults.FAULTS."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from numa_align import nrt_api

from tests.cluster.faults import (
    NAMESPACE,
    RESYNC_GRACE,
    Fault,
    api,
    bound_pods,
    guaranteed_pod,
    in_step,
    pod_status,
    wait,
)
from tests.cluster.guests import ssh


def stuck_pending_pod(state: Path, node: str, image: str, scheduler: str = "numa-aware") -> Fault:
    """A Guaranteed pod on `node` whose image does not exist: admitted (its CPU allocated), then stuck Pending
    in ImagePullBackOff. The kubelet lists it, so numa-align's fingerprint counts it, and numa-lab's scheduler
    counts every bound, unfinished pod: the node is in step with the stuck pod included, so the scheduler takes
    it back after marking it, and a NUMA-aware pod for `node` is bound and runs."""
    core = client.CoreV1Api(api(state))
    custom = client.CustomObjectsApi(api(state))
    stuck, placed = f"fault-stuck-{node}", f"fault-after-stuck-{node}"
    missing = image.split("/")[0] + "/numa-lab/no-such-image:1"  # the lab registry has no such image
    return _stuck_pending_pod(state, core, custom, node, image, scheduler, stuck, placed, missing)


def _stuck_pending_pod(state: Path, core: client.CoreV1Api, custom: client.CustomObjectsApi, node: str, image: str,
                       scheduler: str, stuck: str, placed: str, missing: str) -> Fault:
    created = core.create_namespaced_pod(NAMESPACE, guaranteed_pod(stuck, node, missing))
    since = created.metadata.creation_timestamp.timestamp()
    others = [name for _, name in bound_pods(core, node) if name != stuck]
    try:
        def pulling() -> bool:
            statuses = core.read_namespaced_pod(stuck, NAMESPACE).status.container_statuses or []
            waiting = statuses[0].state.waiting if statuses else None
            return waiting is not None and waiting.reason in ("ErrImagePull", "ImagePullBackOff")
        wait(f"{stuck} stuck pulling an image that does not exist", pulling, 120)

        synced = wait(f"{node}'s NRT fingerprint that of its bound, unfinished pods (the stuck one included)",
                      lambda: in_step(core, custom, node), 60)
        assert core.read_namespaced_pod(stuck, NAMESPACE).status.phase == "Pending"  # still stuck: the fault holds
        time.sleep(RESYNC_GRACE)  # the scheduler's resync (every 5 s) trusts the object again in that time
        core.create_namespaced_pod(NAMESPACE, guaranteed_pod(placed, node, image, scheduler))
        ran = wait(f"{placed} ({scheduler}) Running on {node} beside the stuck pod", lambda: (
            core.read_namespaced_pod(placed, NAMESPACE).status.phase == "Running"), 180,
            why=lambda: pod_status(core, placed))
    finally:
        for name in (stuck, placed):
            try:
                core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    said = scheduler_said(state, node, since)
    marks = [i for i, text in enumerate(said) if "marked with foreign pods" in text]
    assert marks, f"numa-scheduler never marked {node} for the stuck pod (the fault did not take): {said[-5:]}"
    how = took(said[marks[0]:])
    # The stuck pod is bound, so the node is never idle (the idle sweep is for a node with no pod bound): the
    # object's fingerprint counting the stuck pod, the cache took the node back by its adopter or a resync flush.
    assert how, f"{node} (the stuck pod and {len(others)} other pods bound) never taken back: {said[-5:]}"
    return Fault("stuck Pending pod", f"a Guaranteed pod on {node} with an image that does not exist "
                                      f"(ImagePullBackOff, its CPU allocated), {len(others)} other pods bound there",
                 f"NRT fingerprint = {node}'s bound, unfinished pods, the stuck one included; the scheduler marked "
                 f"the node, then took it back ({how}); a {scheduler} pod bound and Running beside it",
                 f"in step {synced:.0f} s after the pod stuck; the {scheduler} pod ran {ran:.0f} s after creation",
                 "nothing")


def scheduler_said(state: Path, node: str, since: float) -> list[str]:
    """numa-scheduler's journal lines about `node` stamped at or after `since` (epoch s, the server's clock)."""
    journal = ssh(state, "server", "journalctl -u numa-scheduler --no-pager -o short-unix --since "
                                   f"@{since - 1:.0f}").stdout.splitlines()
    said = []
    for line in journal:
        stamp, _, text = line.partition(" ")
        if f'node="{node}"' in text and stamp.replace(".", "").isdigit() and float(stamp) >= since:
            said.append(text)
    return said


def took(said: list[str], uid: str | None = None) -> str:
    """How the cache took a node's object in `said` (scheduler_said), or "": numa-lab's adopter (naming `uid`
    when given), or a flush of the node (upstream's resync, when the node was marked for it; -v=2)."""
    for text in said:
        if "adopting NodeResourceTopology" in text and (uid is None or uid in text):
            return "numa-lab's adopter" + (", the node idle" if "no pod bound" in text else "")
        if '"flushing"' in text:
            return "upstream's resync: the node was marked for it"
    return ""


def cache_took(state: Path, node: str, made: dict[str, Any]) -> str:
    """How numa-scheduler's cache took `node`'s object `made` (its metadata), or "", by its lines at or after
    the object's creation (by the server's clock), when the old one was gone."""
    return took(scheduler_said(state, node, _epoch(made["creationTimestamp"])), made["uid"])


def _epoch(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def node_registered_again(state: Path, node: str, image: str, scheduler: str = "numa-aware") -> Fault:
    """`node`'s Node deleted and made again at once (numa-lab's own ensure_node, with the same podCIDR) and its
    kubelet restarted, which registers by adopting it, as after a node's rebuild: its NRT object goes with the
    old Node (owned by it) while numa-align is stopped, numa-align started again makes a new one for the new
    Node, and the NUMA-aware scheduler adopts it without a restart
    (numa-scheduler's nrtadopt, scheduler-plugins#967) and places a pod on the node by it."""
    return _node_registered_again(state, node, image, scheduler)


def _node_registered_again(state: Path, node: str, image: str, scheduler: str) -> Fault:
    from numalab.deploy.api import ensure_node

    core = client.CoreV1Api(api(state))
    custom = client.CustomObjectsApi(api(state))

    def nrt() -> dict[str, Any] | None:
        try:
            return custom.get_cluster_custom_object(nrt_api.GROUP, nrt_api.VERSION, nrt_api.PLURAL,
                                                    node)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    # The node in step first, so no foreign-pod mark left by the case before holds it for upstream's resync
    # (the adopter then leaves it alone, and says nothing)
    wait(f"{node} in step before its Node goes", lambda: in_step(core, custom, node), 60)
    time.sleep(RESYNC_GRACE)
    old = core.read_node(node)
    old_nrt = nrt()
    assert old_nrt is not None and old_nrt["metadata"]["ownerReferences"][0]["uid"] == old.metadata.uid
    scheduler_started = ssh(state, "server", "systemctl show numa-scheduler -p ActiveEnterTimestampMonotonic "
                                             "--value").stdout.strip()
    started = time.monotonic()
    # numa-align stopped first, as on a node being rebuilt: the old object goes with its Node (the garbage
    # collector) before a new one is made, in that order every run. Running, numa-align races the collector
    # (it writes the object with the Node uid it read before), and the case would not know which it saw.
    stopped = ssh(state, node, "systemctl stop numa-align")
    assert stopped.returncode == 0, stopped.stderr
    core.delete_node(node)
    ensure_node(state / "kubeconfig", node, old.spec.pod_cidr)
    new = core.read_node(node)
    assert new.metadata.uid != old.metadata.uid  # the fault took effect: another Node of that name
    wait(f"{node}'s old NRT object gone with its Node", lambda: (nrt() or {}).get("metadata", {}).get("uid")
         != old_nrt["metadata"]["uid"], 120, 2)
    # The kubelet registers again at its start, adopting the Node (its labels and status), as after a rebuild
    restarted_kubelet = ssh(state, node, "systemctl restart kubelet && systemctl start numa-align")
    assert restarted_kubelet.returncode == 0, restarted_kubelet.stderr

    def registered() -> bool:
        found = core.read_node(node)
        ready = any(c.type == "Ready" and c.status == "True" for c in (found.status.conditions or []))
        return ready and (found.metadata.labels or {}).get("kubernetes.io/hostname") == node
    wait(f"{node} registered again by its kubelet (labels, Ready)", registered, 180, 3)

    def made_again() -> bool:
        found = nrt()
        return found is not None and found["metadata"]["ownerReferences"][0]["uid"] == new.metadata.uid
    remade = wait(f"{node}'s NRT object made again for its new Node", made_again, 180, 3)
    made = nrt()["metadata"]
    assert made["uid"] != old_nrt["metadata"]["uid"]  # a new object, which the cache has never seen
    adopted = wait("numa-scheduler's cache taking the new object", lambda: bool(cache_took(state, node, made)), 90, 2,
                   why=lambda: f"object {made['uid']} made {made['creationTimestamp']}; numa-scheduler said: " + ssh(
                       state, "server", "journalctl -u numa-scheduler --no-pager -o short-unix --since "
                       f"@{_epoch(made['creationTimestamp']) - 60:.0f} | grep -E 'nrtadopt|{node}|rror' | tail -15"
                   ).stdout)
    how = cache_took(state, node, made)
    name = f"fault-after-reregistration-{node}"
    core.create_namespaced_pod(NAMESPACE, guaranteed_pod(name, node, image, scheduler))
    try:
        ran = wait(f"{name} ({scheduler}) Running on {node}", lambda: (
            core.read_namespaced_pod(name, NAMESPACE).status.phase == "Running"), 180)
    finally:
        core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
    restarted = ssh(state, "server", "systemctl show numa-scheduler -p ActiveEnterTimestampMonotonic "
                                     "--value").stdout.strip()
    assert restarted == scheduler_started, "numa-scheduler was restarted: the object was not adopted live"
    return Fault("Node deleted and registered again", f"Node {node} deleted and made again at once (new uid), "
                 "numa-align stopped across it",
                 f"NRT object made again for the new Node; numa-scheduler's cache took it live ({how}; not "
                 f"restarted); a {scheduler} pod ran on {node}",
                 f"object back {remade:.0f} s after, taken {adopted:.0f} s later, pod Running in {ran:.0f} s",
                 f"nothing (total {time.monotonic() - started:.0f} s)")
