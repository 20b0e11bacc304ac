"""Case 5's pure part: numa-align's registrations counter read from its /metrics text."""

from __future__ import annotations

import sys

from tests.e2e_logic.conftest import load_e2e_module

for _name in ("kube", "probe_pods", "results"):  # case 5 imports them as the suite does
    sys.modules.setdefault(_name, load_e2e_module(_name))
restart_case = load_e2e_module("test_5_kubelet_restart")


def test_registrations_are_read_from_numa_aligns_metrics_text() -> None:
    text = ("# HELP numa_align_registrations_total Successful Register calls to the kubelet\n"
            "# TYPE numa_align_registrations_total counter\nnuma_align_registrations_total 4.0\n"
            "numa_align_registrations_created 1.7e9\n")
    assert restart_case.registrations(text) == 4
    assert restart_case.registrations('numa_align_devices{resource="x"} 1.0\n') is None
