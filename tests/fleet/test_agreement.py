"""One code path: for random pods on every shape, the simulated kubelet's verdict is the one `numalab explain` gives
from the API objects the driver would have published (the node's object, its Node, its pods with the statuses
the simulator wrote)."""

import random

import pytest

from numalab.explain.requests import pod_request
from numalab.explain.verdicts import explain
from numalab.fleet.kubelet_sim import SimulatedKubelet
from numalab.fleet.spec import SHAPES
from tests.fleet.pods import container, node, pod

VARIANTS = [(name, {}) for name in SHAPES] + [
    ("2cell-16", {"topology_manager_scope": "container"}),
    ("2cell-16", {"topology_manager_policy": "restricted"}),
    ("2cell-16", {"topology_manager_policy": "best-effort"}),
    ("2cell-16", {"topology_manager_policy": "none"}),
    ("2cell-smt-32", {"memory_manager_policy": "None"}),
    ("4cell-smt-64", {"topology_manager_policy": "restricted", "topology_manager_scope": "container"}),
]


def random_pod(rng: random.Random, name: str, cells: int) -> dict:
    cpus = rng.choice(["1", "2", "3", "4", "6", "8", "12", "20"])
    memory = rng.choice(["512Mi", "1Gi", "4Gi", "10Gi", "20Gi"])
    kind = rng.choice(["guaranteed"] * 4 + ["hugepages", "device", "burstable", "besteffort", "fractional", "two",
                                            "init"])
    if kind == "hugepages":
        return pod(name, container(cpu=cpus, memory=memory, extra={"hugepages-2Mi": rng.choice(["256Mi", "1Gi"])}))
    if kind == "device":
        extra = {f"numa-align/numa-{rng.randrange(cells)}": str(rng.choice([1, 2]))}
        return pod(name, container(cpu=cpus, memory=memory, extra=extra))
    if kind == "burstable":
        return pod(name, container(cpu="500m", memory="512Mi", limits={"cpu": cpus, "memory": "1Gi"}))
    if kind == "besteffort":
        return pod(name, {"name": "main", "image": "x"})
    if kind == "fractional":
        return pod(name, container(cpu="1500m", memory=memory))
    if kind == "two":
        return pod(name, container(name="a", cpu=cpus, memory=memory), container(name="b", cpu="2", memory="1Gi"))
    return pod(name, container(cpu=cpus, memory=memory),
               init=(container(name="setup", cpu=rng.choice(["1", "4"]), memory="1Gi"),) if kind == "init" else ())


@pytest.mark.parametrize(("shape", "settings"), VARIANTS, ids=[f"{s}-{'-'.join(o.values()) or 'defaults'}"
                                                                for s, o in VARIANTS])
def test_simulated_kubelet_agrees_with_explain_on_what_was_published(shape, settings):
    rng = random.Random(f"{shape}{settings}")
    desc = node(shape, **settings)
    kubelet = SimulatedKubelet(desc, "uid-agree")
    published: dict[str, dict] = {}  # the node's pods as the API shows them after the simulator's writes
    verdicts = set()
    for step in range(60):
        if published and rng.random() < 0.25:
            gone = rng.choice(sorted(published))
            del published[gone]
            kubelet.release("default", gone)
            continue
        name = f"p{step}"
        candidate = random_pod(rng, name, len(desc.shape.topology.cpu_cells))
        (expected,) = explain(pod_request({**candidate, "spec": {**candidate["spec"], "nodeName": None}}, name),
                              [kubelet.nrt], [kubelet.node_object], published.values())
        decision = kubelet.admit(candidate)
        assert (decision.verdict, decision.reason) == (expected.verdict, expected.reason), f"step {step}: {candidate}"
        if decision.verdict == "admitted":
            assert dict(decision.cells) == expected.cells
            published[name] = {**candidate, **decision.status_patch}
        verdicts.add(decision.verdict)
    assert {"admitted", "rejected"} <= verdicts
