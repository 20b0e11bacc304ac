"""The NRT case's judge: a zone agrees with the pinned pod only when exactly its CPUs and devices are taken."""

from __future__ import annotations

from tests.e2e_logic.conftest import load_e2e_module

nrt_case = load_e2e_module("nrt")


def nrt(cpu_available: int, devices_available: int = 99, memory_available: int = 1000,
        policy: str = "single-numa-node", fingerprint: str = "pfp0v001ef46db3751d8e999") -> dict:
    def resource(name: str, allocatable: int, available: int) -> dict:
        return {"name": name, "capacity": str(allocatable), "allocatable": str(allocatable),
                "available": str(available)}
    return {
        "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                       {"name": "nodeTopologyPodsFingerprint", "value": fingerprint}],
        "zones": [{"name": "node-1", "type": "Node", "resources": [
            resource("cpu", 3, cpu_available), resource("memory", 1000, memory_available),
            resource("numa-align/numa-1", 100, devices_available)]}],
    }


def judge(obj: dict | None, static: bool = False) -> list[str]:
    return nrt_case.judge_zone(obj, 1, cpus=1, devices=1, memory_static=static, policy="single-numa-node")


def test_a_zone_showing_the_pinned_pod_taken_passes() -> None:
    assert judge(nrt(2)) == []
    assert judge(nrt(2, memory_available=900), static=True) == []
    assert nrt_case.summary(nrt(2), 1) == "cpu 2/3, numa-align/numa-1 99/100 available"


def test_a_zone_that_missed_the_pod_or_counts_wrong_fails_naming_the_resource() -> None:
    assert judge(nrt(3)) == ["cpu available 3, expected 3 - 1"]
    assert judge(nrt(2, devices_available=100)) == ["numa-align/numa-1 available 100, expected 100 - 1"]
    assert judge(nrt(2), static=True) == [
        "memory available 1000 not below allocatable under the Static policy"]
    assert "memory available 900 != allocatable 1000" in judge(nrt(2, memory_available=900))[0]


def test_attributes_and_missing_objects_are_named() -> None:
    assert "no NodeResourceTopology object" in judge(None)[0]
    assert judge(nrt(2, policy="none")) == [
        "attribute topologyManagerPolicy 'none', expected 'single-numa-node'"]
    assert "no pod fingerprint" in judge(nrt(2, fingerprint=""))[0]
    assert nrt_case.judge_zone(nrt(2), 0, 1, 1, False, "single-numa-node") == ["no zone node-0 of type Node"]


def test_the_object_is_asked_again_until_it_agrees() -> None:
    answers = iter([None, nrt(3), nrt(2)])
    seen, problems = nrt_case.wait_agreeing(lambda: next(answers), judge, wait=10, every=0)
    assert problems == [] and seen == nrt(2)
