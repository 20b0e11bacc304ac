"""The cpuset auditor on fake cgroup trees: an aligned container, a cpuset changed behind the kubelet's back
(reported at the next poll), CPUs on one cell and memory on another, a tree it cannot read (unknown, one
line, no exception), the systemd and cgroupfs layouts, a restarted container, and stranded CPUs on an
uneven 3-cell host."""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path

import pytest
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.audit import ANNOTATION, stranded_cpus
from numa_align.auditing import Auditor
from numa_align.metrics import Metrics
from numa_align.nrt import Allocatable, ExclusiveUse, allocatable_from_podresources, exclusive_from_podresources
from numa_align.sysfs import HostTopology, read_sysfs

from tests.plugin.fakecgroup import write_cgroup_root, write_container

UID = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
ID = "4b1d"


def listed(*containers: tuple[str, list[int], list[int]]) -> pb.ListPodResourcesResponse:
    """Pod numa/app with the given (container, cpu_ids, memory NUMA nodes)."""
    return pb.ListPodResourcesResponse(pod_resources=[pb.PodResources(namespace="numa", name="app", containers=[
        pb.ContainerResources(name=name, cpu_ids=cpus, memory=[
            pb.ContainerMemory(memory_type="memory", size=2**30,
                               topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in mems]))] if mems else [])
        for name, cpus, mems in containers])])


def api_pod(ids: dict[str, str], uid: str = UID) -> dict:
    return {"metadata": {"namespace": "numa", "name": "app", "uid": uid},
            "status": {"phase": "Running", "qosClass": "Guaranteed",
                       "containerStatuses": [{"name": name, "containerID": f"containerd://{cid}"}
                                             for name, cid in ids.items()]}}


@pytest.fixture
def host(make_sysfs) -> HostTopology:
    return read_sysfs(make_sysfs({0: "0-3", 1: "4-7"}))


class Lookup:
    """The API's Running pods of the node, as the auditor's lookup; `calls` counts the lists."""

    def __init__(self, pods: list[dict]) -> None:
        self.pods, self.calls = pods, 0

    def __call__(self) -> list[dict]:
        self.calls += 1
        return self.pods


def run(auditor: Auditor, answer: pb.ListPodResourcesResponse, host: HostTopology, metrics: Metrics | None = None):
    result = auditor.run(answer, host, allocatable_from_podresources(None, host),
                         exclusive_from_podresources(answer, host))
    if metrics is not None:
        metrics.set_audit(result)
    return result


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_an_aligned_container_is_neither_split_nor_drifted(tmp_path, host):
    root = write_cgroup_root(tmp_path / "cgroup")
    write_container(root, UID, ID, "2-3", "0")
    auditor, metrics = Auditor(root, Lookup([api_pod({"app": ID})]), 2.0), Metrics()
    result = run(auditor, listed(("app", [2, 3], [0])), host, metrics)
    assert (result.readable, result.split, result.drift, dict(result.cells)) == (True, [], [], {0: 2, 1: 0})
    assert value(metrics, "numa_align_audit_readable") == 1
    assert value(metrics, "numa_align_containers_split") == value(metrics, "numa_align_containers_cpuset_drift") == 0
    assert value(metrics, "numa_align_node_cpus_exclusive_in_cpusets", node="0") == 2
    assert value(metrics, "numa_align_audit_containers", result="audited") == 1
    assert result.annotation() == {ANNOTATION: '{"cells":{"0":2,"1":0},"drift":[],"readable":true,"split":[],'
                                               '"stranded":2}'}


def test_a_cpuset_changed_behind_the_kubelets_back_is_reported_at_the_next_poll(tmp_path, host, caplog):
    root = write_cgroup_root(tmp_path / "cgroup")
    scope = write_container(root, UID, ID, "2-3", "0")
    lookup = Lookup([api_pod({"app": ID})])
    auditor, metrics, answer = Auditor(root, lookup, 2.0), Metrics(), listed(("app", [2, 3], [0]))
    run(auditor, answer, host, metrics)
    (scope / "cpuset.cpus.effective").write_text("1-3\n")  # someone wrote cpuset.cpus by hand
    result = run(auditor, answer, host, metrics)
    assert result.drift == ["numa/app/app"] and result.split == [] and lookup.calls == 1  # no list needed
    assert value(metrics, "numa_align_containers_cpuset_drift") == 1
    assert value(metrics, "numa_align_container_cpuset_problem", namespace="numa", pod="app", container="app",
                 problem="drift") == 1
    assert dict(result.cells) == {0: 3, 1: 0}  # what runs, not what the kubelet believes
    assert any("cpuset drift" in r.getMessage() and "numa/app/app" in r.getMessage() for r in caplog.records)
    (scope / "cpuset.cpus.effective").write_text("2-3\n")
    run(auditor, answer, host, metrics)
    assert value(metrics, "numa_align_containers_cpuset_drift") == 0
    assert value(metrics, "numa_align_container_cpuset_problem", namespace="numa", pod="app", container="app",
                 problem="drift") is None  # only offending containers have a series


def test_mems_other_than_the_memory_managers_choice_are_drift_too(tmp_path, host):
    root = write_cgroup_root(tmp_path / "cgroup")
    write_container(root, UID, ID, "2-3", "0-1")
    result = run(Auditor(root, Lookup([api_pod({"app": ID})]), 2.0), listed(("app", [2, 3], [0])), host)
    assert result.drift == ["numa/app/app"] and result.split == []


def test_cpus_on_cell_0_and_memory_on_cell_1_are_split(tmp_path, host):
    root = write_cgroup_root(tmp_path / "cgroup")
    write_container(root, UID, ID, "1-2", "1")
    write_container(root, UID, "wide", "5", "0-1")  # mems wider than its cell: not split
    auditor, metrics = Auditor(root, Lookup([api_pod({"app": ID, "side": "wide"})]), 2.0), Metrics()
    result = run(auditor, listed(("app", [1, 2], []), ("side", [5], [])), host, metrics)
    assert result.split == ["numa/app/app"] and result.drift == []
    assert value(metrics, "numa_align_containers_split") == 1
    assert value(metrics, "numa_align_container_cpuset_problem", namespace="numa", pod="app", container="app",
                 problem="split") == 1


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
@pytest.mark.parametrize("qos", ["", "burstable", "besteffort"])
def test_both_cgroup_drivers_and_every_qos_class_are_found(tmp_path, host, driver, qos):
    root = write_cgroup_root(tmp_path / "cgroup")
    write_container(root, UID, ID, "4", "1", driver=driver, qos=qos)
    result = run(Auditor(root, Lookup([api_pod({"app": ID})]), 2.0), listed(("app", [4], [1])), host)
    assert (len(result.findings), result.not_found, result.drift) == (1, (), [])


@pytest.mark.parametrize("breakage", ["no tree", "no cpuset controller", "unreadable cpuset file"])
def test_a_tree_it_cannot_read_is_unknown_in_one_line_and_never_raises(tmp_path, host, caplog, breakage):
    root = tmp_path / "cgroup"
    if breakage != "no tree":
        write_cgroup_root(root, "cpu memory" if breakage == "no cpuset controller" else "cpuset cpu")
        scope = write_container(root, UID, ID, "2-3", "0")
        if breakage == "unreadable cpuset file":
            (scope / "cpuset.cpus.effective").unlink()
            (scope / "cpuset.cpus.effective").mkdir()  # EISDIR: as unreadable as EACCES, even for root
    auditor, metrics = Auditor(root, Lookup([api_pod({"app": ID})]), 2.0), Metrics()
    caplog.set_level(logging.INFO, "numa_align.auditing")
    for _ in range(3):
        result = run(auditor, listed(("app", [2, 3], [0])), host, metrics)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(root) in warnings[0], warnings
    assert not result.readable and result.summary()["readable"] is False
    assert value(metrics, "numa_align_audit_readable") == 0
    assert math.isnan(value(metrics, "numa_align_containers_split"))
    assert math.isnan(value(metrics, "numa_align_containers_cpuset_drift"))
    assert value(metrics, "numa_align_stranded_cpus") == 2  # from PodResources: known without cgroups
    if breakage == "unreadable cpuset file":
        (scope / "cpuset.cpus.effective").rmdir()
    write_cgroup_root(root)
    write_container(root, UID, ID, "2-3", "0")
    assert run(auditor, listed(("app", [2, 3], [0])), host, metrics).readable
    assert any("read again" in r.getMessage() for r in caplog.records)


def test_without_an_api_client_pinned_containers_are_unknown(tmp_path, host):
    root = write_cgroup_root(tmp_path / "cgroup")
    result = run(Auditor(root, None, 2.0), listed(("app", [2, 3], [0])), host)
    assert not result.readable and "NUMA_ALIGN_NRT" in result.why
    assert run(Auditor(root, None, 2.0), listed(), host).readable  # nothing pinned: nothing unknown


def test_a_restarted_container_is_looked_up_again_at_once_and_a_starting_one_with_backoff(tmp_path, host):
    root = write_cgroup_root(tmp_path / "cgroup")
    old = write_container(root, UID, ID, "2-3", "0")
    lookup = Lookup([api_pod({"app": ID})])
    clock = [0.0]
    auditor, answer = Auditor(root, lookup, 2.0, clock=lambda: clock[0]), listed(("app", [2, 3], [0]))
    run(auditor, answer, host)
    shutil.rmtree(old)  # the old container's cgroup goes, the new one's comes
    write_container(root, UID, "n3w", "2-3", "0")
    lookup.pods = [api_pod({"app": "n3w"})]
    result = run(auditor, answer, host)
    assert (lookup.calls, len(result.findings)) == (2, 1)
    starting = listed(("app", [2, 3], [0]), ("late", [4], [1]))  # admitted, no container yet
    for _ in range(10):  # 20 s of polls: lists at 0, 2, 6, 14 s (doubling), not every poll
        result = run(auditor, starting, host)
        clock[0] += 2.0
    assert lookup.calls == 2 + 4 and [p.container for p in result.not_found] == ["late"]


def test_a_container_starting_on_its_assigned_cpus_leaves_the_annotation_as_it_was(tmp_path, host):
    """Admission (PodResources lists it, no cgroup yet) is one change of the object; the container's start on
    the CPUs it was given is none: its cells count by the assignment until its cgroup is there."""
    root = write_cgroup_root(tmp_path / "cgroup")
    lookup = Lookup([api_pod({"app": ID})])
    auditor, answer = Auditor(root, lookup, 2.0), listed(("app", [2, 3], [0]))
    admitted = run(auditor, answer, host)
    assert [p.container for p in admitted.not_found] == ["app"]
    write_container(root, UID, ID, "2-3", "0")
    started = run(auditor, answer, host)
    assert (started.not_found, len(started.findings)) == ((), 1)
    assert started.annotation() == admitted.annotation()


def test_stranded_cpus_on_an_uneven_three_cell_host(tmp_path, make_sysfs):
    """Free per cell: 4-3=1, 6-2=4, 2-0=2: 7 free, the largest block 4, so 3 CPUs no one-cell pod can get."""
    allocatable = Allocatable({0: {"cpu": 4}, 1: {"cpu": 6}, 2: {"cpu": 2}})
    exclusive = ExclusiveUse({0: {"cpu": 3}, 1: {"cpu": 2}})
    assert stranded_cpus(allocatable, exclusive) == 3
    assert stranded_cpus(Allocatable({0: {"cpu": 4}}), ExclusiveUse({})) == 0  # one cell: nothing stranded
    host = read_sysfs(make_sysfs({0: "0-3", 1: "4-9", 2: "10-11"}))
    metrics, auditor = Metrics(), Auditor(write_cgroup_root(tmp_path / "cgroup"), None, 2.0)
    metrics.set_audit(auditor.run(listed(), host, allocatable, exclusive))
    assert value(metrics, "numa_align_stranded_cpus") == 3
    assert {n: value(metrics, "numa_align_node_cpus_exclusive_in_cpusets", node=str(n)) for n in (0, 1, 2)} == {
        0: 0, 1: 0, 2: 0}


def test_the_default_root_follows_the_sysfs_root():
    from numa_align.settings import Settings, read_settings
    assert Settings(sysfs_root=Path("/host/sys")).cgroup_tree == Path("/host/sys/fs/cgroup")
    assert read_settings({"NUMA_ALIGN_CGROUP_ROOT": "/cg"}, {}, serving=False).cgroup_tree == Path("/cg")


def test_the_publisher_audits_every_poll_and_writes_the_object_only_when_the_audit_changes(
        socket_dir, host, client, fake, clock, tmp_path):
    """Wired into the PodResources poll: gauges and the object's annotation; one list of whole pods for the
    new pinned pod, none while quiet, one write for the drift and none for the polls after it."""
    from numa_align.publishing import NrtPublisher
    from numa_align.settings import Settings

    from tests.kubeletdouble.podresources import ContainerAlloc, PodAlloc, serve_pod_resources
    from tests.plugin.conftest import IDLE, NODE

    root = write_cgroup_root(tmp_path / "cgroup")
    scope = write_container(root, UID, ID, "2-3", "0")
    fake.set_pod("numa", "app", NODE)
    fake.pod_details[("numa", "app")] = {"uid": UID, "status": api_pod({"app": ID})["status"]}
    settings = Settings(nrt=True, node_name=NODE, pod_resources_socket=socket_dir / "pr.sock", metrics_addr=None,
                        cgroup_root=root)
    metrics = Metrics()
    publisher = NrtPublisher(settings, lambda: host, client, metrics, clock=clock, jitter=lambda: 0.0)
    with serve_pod_resources(socket_dir / "pr.sock") as double:
        double.set_pods([IDLE, PodAlloc("numa", "app", [ContainerAlloc("app", cpus=[2, 3])])])
        publisher.poll_once()
        pod_lists = sum(1 for method, path, _ in fake.seen if method == "GET" and "/api/v1/pods" in path)
        assert (pod_lists, publisher.auditor.lists) == (1, 1)  # the auditor's: the fingerprint needs no list
        assert value(metrics, "numa_align_audit_containers", result="audited") == 1
        annotation = fake.nrts[NODE]["metadata"]["annotations"][ANNOTATION]
        assert '"drift":[]' in annotation and '"readable":true' in annotation
        for _ in range(3):
            clock.advance(2)
            publisher.poll_once()
        assert (publisher.status, len(fake.writes), publisher.auditor.lists) == ("unchanged", 1, 1)
        (scope / "cpuset.cpus.effective").write_text("1-3\n")
        clock.advance(2)
        publisher.poll_once()
        assert value(metrics, "numa_align_containers_cpuset_drift") == 1
        assert len(fake.writes) == 2 and '"drift":["numa/app/app"]' in fake.nrts[NODE]["metadata"]["annotations"][
            ANNOTATION]
        for _ in range(3):
            clock.advance(2)
            publisher.poll_once()
        assert len(fake.writes) == 2
