"""The cluster test's slow fault cases after its freshness block (tests/cluster/test_cluster.py runs them unless
NUMALAB_FAULT_CASES=short): numa-align killed on worker-3 while worker-1 is hard-reset, then powered off and on
with less memory in a cell under a pinned pod. (worker-1's Node deleted and registered again runs earlier, beside
worker-3's freshness measurement.)"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from numalab.lab.spec import Lab
from tests.cluster.fault_plugin import kill_numa_align, stale_then_back
from tests.cluster.fault_reboots import PinnedPod, changed_memory_power_cycle, hard_resets
from tests.cluster.faults import FAULTS, fault_case
from tests.cluster.power import reset_guest, shrink_cell
from tests.cluster.steps import step


def extended_fault_cases(state: Path, env: dict[str, str], lab: Lab, image: str, shrunk_mib: int) -> None:
    """The slow fault cases (EXTENDED; NUMALAB_FAULT_CASES=short leaves them out): numa-align killed on worker-3,
    and in a thread its staleness once its Lease lapsed and its return, while worker-1 is hard-reset, then powered
    off and on with less memory in cell 1 under a pinned pod."""
    killed_at = kill_numa_align(state, "worker-3")

    def stale_then_back_case() -> None:
        with fault_case("numa-align killed"):
            FAULTS.append(stale_then_back(state, env, "worker-3", killed_at))

    with ThreadPoolExecutor(max_workers=1) as beside:
        back = beside.submit(stale_then_back_case)
        worker_1_fault_cases(state, lab, image, shrunk_mib)
        with step("fault: numa-align killed on worker-3 (stale, then back; what was left of it after worker-1's)"):
            back.result()


def worker_1_fault_cases(state: Path, lab: Lab, image: str, shrunk_mib: int) -> None:
    """Two hard power-offs of worker-1 in a row under one pinned pod."""
    with step("fault: worker-1 hard-reset, then powered off and on with less memory in cell 1"), \
            fault_case("hard reset, then cell memory changed + power cycle"):
        pinned = PinnedPod(state, "worker-1", image, cell=1)
        try:  # two hard power-offs in a row under the same pinned pod, the second on changed hardware
            with fault_case("hard reset"):
                FAULTS.append(hard_resets(pinned, lambda: reset_guest(lab, "worker-1"), times=1))
            with fault_case("cell memory changed + power cycle"):
                FAULTS.append(changed_memory_power_cycle(pinned, lambda: shrink_cell(lab, "worker-1", 1,
                                                                                     shrunk_mib)))
        finally:
            pinned.delete()
