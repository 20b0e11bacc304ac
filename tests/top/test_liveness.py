"""`numalab top` marks a node "numa-align stale since T" when its Lease expired or is absent while its
NodeResourceTopology object exists; a current Lease, or Leases that cannot be read, mark nothing."""

import datetime
import json

from kubernetes.client.rest import ApiException

from numalab.cli import main
from numalab.top import command
from numalab.top.liveness import stale_since
from numalab.top.model import build_views
from numalab.top.source import ApiSource
from tests.top.fakes import FakeSource, lease, sample_cluster

NOW = datetime.datetime(2026, 1, 2, 3, 10, 0, tzinfo=datetime.UTC)


def views(leases, now=NOW):
    return {view.name: view for view in build_views(*sample_cluster(), leases=leases, now=now)}


def test_an_expired_lease_marks_its_node_stale_since_its_last_renewal():
    shown = views([lease("worker-1", "2026-01-02T03:09:30.123456Z"), lease("worker-2", "2026-01-02T03:05:00.000000Z")])
    assert shown["worker-1"].stale is None
    assert shown["worker-2"].stale == ("numa-align stale since 2026-01-02T03:05:00Z (its Lease was not renewed for "
                                       "300 s; is numa-align running on worker-2?)")
    assert shown["worker-2"].warnings[0] == shown["worker-2"].stale  # every rendering shows warnings
    assert shown["server"].stale is None  # no NRT object: nothing to vouch for


def test_a_missing_lease_is_stale_and_unreadable_leases_mark_nothing():
    shown = views([lease("worker-1", "2026-01-02T03:09:30Z")])
    assert shown["worker-2"].stale.startswith("numa-align stale: no Lease kube-system/numa-align-worker-2")
    assert all(view.stale is None for view in views(None).values())
    assert stale_since("worker-1", {"numa-align-worker-1": lease("worker-1", "2026-01-02T03:08:00Z")}, NOW) is None
    assert stale_since("worker-1", {"numa-align-worker-1": lease("worker-1", "2026-01-02T03:07:59Z")}, NOW)


def test_the_table_and_json_say_stale(monkeypatch, capsys):
    old = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fresh = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    source = FakeSource(*sample_cluster(), leases=[lease("worker-1", fresh), lease("worker-2", old)])
    monkeypatch.setattr(command, "open_source", lambda kubeconfig, context: source)
    assert main(["top", "--kubeconfig", "/dev/null"]) == 0
    out = capsys.readouterr().out
    assert "warning: numa-align stale since" in out and "running on worker-2?" in out
    assert "running on worker-1?" not in out
    assert main(["top", "--kubeconfig", "/dev/null", "--format", "json"]) == 0
    nodes = {node["name"]: node for node in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["worker-1"]["stale"] is None and nodes["worker-2"]["stale"].startswith("numa-align stale since")


class Items:
    def __init__(self, items):
        self.items = items


class Coordination:
    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def list_namespaced_lease(self, namespace, **kwargs):
        self.asked.append((namespace, kwargs.get("label_selector")))
        if isinstance(self.answer, Exception):
            raise self.answer
        return Items(self.answer)


def test_the_api_source_reads_numa_aligns_leases_and_a_refusal_is_unknown():
    coordination = Coordination([lease("worker-1", "2026-01-02T03:09:30Z")])
    source = ApiSource(None, None, "https://api:6443", coordination=coordination)
    assert source.leases() == [lease("worker-1", "2026-01-02T03:09:30Z")]
    assert coordination.asked == [("kube-system", "app.kubernetes.io/name=numa-align")]
    refused = ApiSource(None, None, "https://api:6443",
                        coordination=Coordination(ApiException(status=403, reason="Forbidden")))
    assert refused.leases() is None
