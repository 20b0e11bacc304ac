"""Expected-vs-seen judgements of a container's placement."""

from __future__ import annotations

from numalab.placement import ProbeReport, judge_exclusive, judge_pinned, judge_shared

NODES = {0: frozenset({0, 1, 2, 3}), 1: frozenset({4, 5, 6, 7})}


def seen(cpus, mems, numa_node=None, nodes=NODES):
    return ProbeReport(frozenset(cpus), frozenset(mems), numa_node, nodes)


def test_pinned_container_on_its_node_passes():
    verdict = judge_pinned(seen({5}, {1}, 1), node=1, count=1, memory_static=True)
    assert verdict.ok, verdict.problems
    assert (verdict.cpus, verdict.mems) == ("5", "1")


def test_cpu_outside_the_node_fails_and_names_it():
    verdict = judge_pinned(seen({3, 4}, {1}, 1), node=1, count=2, memory_static=True)
    assert not verdict.ok
    assert verdict.problems == ("cpus 3-4 are not all on node 1 (4-7): 3 outside",)


def test_wrong_cpu_count_fails():
    verdict = judge_pinned(seen({4, 5}, {1}, 1), node=1, count=1, memory_static=False)
    assert verdict.problems == ("2 cpus allowed, expected exactly 1 exclusive",)


def test_mems_are_judged_only_with_static_memory_manager():
    report = seen({4}, {0, 1}, 1)
    assert judge_pinned(report, node=1, count=1, memory_static=False).ok
    verdict = judge_pinned(report, node=1, count=1, memory_static=True)
    assert verdict.problems == ("mems 0-1, expected 1 (Memory Manager Static)",)


def test_numa_node_env_must_name_the_node():
    assert judge_pinned(seen({4}, {1}, 0), 1, 1, True).problems == ("NUMA_NODE is 0, expected 1",)
    assert judge_pinned(seen({4}, {1}, None), 1, 1, True).problems == ("NUMA_NODE is unset, expected 1",)


def test_node_the_container_cannot_see_fails_at_once():
    verdict = judge_pinned(seen({4}, {1}, 2), node=2, count=1, memory_static=True)
    assert verdict.problems == ("node 2 is not in the container's view of NUMA nodes (0-1)",)


def test_shared_pool_container_passes_only_with_the_whole_pool():
    pool = frozenset({0, 1, 2, 3, 6, 7})
    assert judge_shared(seen(pool, {0, 1}), pool).ok
    verdict = judge_shared(seen({6}, {1}), pool)
    assert verdict.problems == ("cpus 6, expected the shared pool 0-3,6-7", "mems 1, expected every node 0-1")


def test_exclusive_sidecar_is_one_node_and_apart_from_its_neighbours():
    assert judge_exclusive(seen({2}, {0, 1}), 1, disjoint_from=frozenset({5})).ok
    assert judge_exclusive(seen({5}, {1}), 1, disjoint_from=frozenset({5})).problems == (
        "cpus 5 are also another container's",
    )
    assert judge_exclusive(seen({3, 4}, {0, 1}), 2).problems == ("cpus 3-4 span nodes 0-1",)
    verdict = judge_exclusive(seen({0, 1, 2}, {0}), 2)
    assert verdict.problems == ("3 cpus allowed, expected exactly 2 exclusive",)
