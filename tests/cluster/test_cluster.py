"""The real cluster: the default lab's registry, server and worker-1 (2 cells) running upstream Kubernetes,
with worker-3 in place of the default lab's worker-2 (worker-1's twin; one guest fewer on CI's 2 cores),
shaped like a real server (2 threads per core, a whole core offline, a memory-only node, hugepages) under
full-pcpus-only, on which the real kubelet shows what it accepts: the computed policy, whole-core
reservations, pinned pods on whole cores of cells with CPUs, part of a core refused, and no numa-align
device for the memory-only cell.

One test, because every step needs the one before: build or reuse the binaries, bring the lab up and
deploy every stage through the real pyinfra CLI, run the e2e suite against it (pods pinned, both
Cpus_allowed_list and Mems_allowed_list narrowed to node N, a Service reached by its DNS name), inspect a
worker's kubelet; then the fault cases (tests/cluster/faults.py and the fault_*.py beside it, slow_faults.py;
the API server and etcd are restarted under the e2e suite): numa-align killed on worker-3 (stale in `kubectl
numa`, then back), a pod stuck Pending, a Node deleted and registered again, pods in the drain's way,
worker-1 hard-reset and then powered off and on with less memory in a cell, its CPU 3 taken offline, the
API unreachable during a planned reset; then one run changes the Memory Manager policy (a reset, one node
at a time, worker-1's also for its offline CPU) and moves numa-align from its systemd unit to its DaemonSet
(the lab registry's image, each node's own settings), pinned pods pass under both;
a deploy changes nothing (every stage is idempotent and the reset is not done again), run beside those pods;
worker-1 is re-cut into four cells with unequal distances (a power cycle), and the run that takes numa-align
back to its unit gives it restricted + prefer-closest-numa-nodes, where `numalab explain` names the cells the
kubelet then picks; destroy.
Slow (about 40 minutes with cached binaries and images on 2 cores; `make test` runs its other tests beside it);
marked `cluster` and run in CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from kubernetes import config
from numa_align.cpulist import parse_cpulist

from numalab.lab.guest_shape import guest_topology
from tests.cluster.audit_checks import cpuset_drift, rules_loaded
from tests.cluster.checks import (
    WORKERS,
    assert_closest_pairs,
    assert_explain_agreement,
    assert_nrt_rows,
    assert_suite_rows,
    check_go_environment,
    check_numa_align,
    check_real_server_worker,
    check_top,
    configz,
)
from tests.cluster.e2e_runs import CLOSEST, PINNED_UNDER_NONE, SUITE, run_e2e
from tests.cluster.fault_api_outage import api_unreachable_during_a_planned_reset
from tests.cluster.fault_restarts import restart_api_server_during, rode_through_api_restart
from tests.cluster.fault_scheduler_cache import node_registered_again, stuck_pending_pod
from tests.cluster.faults import (
    FAILED,
    FAULTS,
    Fault,
    fault_case,
    pods_in_the_drains_way,
)
from tests.cluster.freshness import measure as freshness
from tests.cluster.guests import boot_id, guest_history, ssh, wait_booted
from tests.cluster.lab_inventory import WORKER_3, write_inventory
from tests.cluster.per_node import check_daemonset_per_node
from tests.cluster.power import reshape
from tests.cluster.slow_faults import extended_fault_cases
from tests.cluster.steps import (
    NOTES,
    failure_excerpt,
    first_deploy_done,
    note_deploy,
    note_durations,
    note_outages,
    note_rows,
    step,
)
from tests.cluster.timed_run import run_timed
from tests.lab.conftest import (
    BIN,
    CLUSTER_SUBNET_OFFSETS,
    REPO,
    free_subnet,
    lab_env,
    lab_of_inventory_with_env,
    leftovers,
    run_numalab,
)
from tests.lab.shapes import FOUR_CELL_NUMA

pytestmark = [pytest.mark.lab, pytest.mark.cluster]
DEPLOY = str(REPO / "deploys" / "cluster.py")
PROBE_IMAGE = "registry:5000/numa-lab/probe:1"  # the e2e suite's default, pushed by the registry stage
API_RESTART_DELAY = 60.0
"""Seconds into the e2e suite at which etcd and kube-apiserver are restarted (its first cases create pods)."""
EXTENDED = os.environ.get("NUMALAB_FAULT_CASES", "all") == "all"
"""Every fault case runs by default; NUMALAB_FAULT_CASES=short leaves out the slow ones (the API server and
etcd restarted under the e2e suite, numa-align killed, a Node registered again, the hard reset and the power
cycle on changed memory: about 10 minutes) for a quicker look while working."""


FRESHNESS_WORKER = "worker-3"
FRESHNESS_PODS = 20
"""Freshness is measured on worker-3 alone (20 pods, the issue's least), beside worker-1's audit and first fault
cases: one at a time on each worker after them took about a minute of the budget."""

SHRUNK_MIB = 1920
SHRUNK_CELL = f"{SHRUNK_MIB}Mi"
"""worker-1's cell 1 after the power cycle on changed memory (2048 MiB before); the deploys after it declare it."""


def results_row(output: str, label: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.strip().startswith(label))
    return line.split()[-4:]


def failed_run(output: str) -> str:
    """What a failed pyinfra run said: its error lines first (the summary table would push them out of the
    tail), then the tail."""
    errors = [line for line in output.splitlines()
              if re.search(r"\] Error|rror:|not ready|Traceback|numa-lab: .* (failed|refused)", line)]
    return "\n".join(["errors:", *errors[:40], "tail:", output[-4000:]])


def changes(run: subprocess.CompletedProcess[str]) -> str:
    """The Grand total's Success column: '-' when no operation changed anything."""
    return results_row(run.stdout + run.stderr, "Grand total")[1]


def deploy(inventory: Path, env: dict[str, str], label: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """deploys/cluster.py on the lab, timed line by line: its phases and slowest operations go to the summary,
    its output (times in front) to LABEL.log beside the inventory, kept with pytest's tmp dirs."""
    timed = run_timed([str(BIN / "pyinfra"), "-y", str(inventory), DEPLOY], env, inventory.parent, timeout,
                      inventory.parent / f"{label}.log")
    note_deploy(label, timed.phases(), timed.slowest_operations())
    return timed.completed


def e2e(state: Path, env: dict[str, str], run: tuple[str, ...], *extra: str) -> subprocess.CompletedProcess[str]:
    """One of e2e_runs' runs against the lab (its targets are the run's own: test_e2e_runs.py collects each)."""
    env = {**env, "KUBECONFIG": str(state / "kubeconfig"), "NUMALAB_SSH_CONFIG": str(state / "ssh_config")}
    return run_e2e(run, env, *extra)


def test_default_lab_runs_upstream_kubernetes_with_pods_pinned(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = lab_env(f"pytest-cluster-{os.getpid()}", state, free_subnet(CLUSTER_SUBNET_OFFSETS))
    env["NUMALAB_DISTRIBUTION"] = "upstream"
    extra = tmp_path / "extra-guests.yaml"
    extra.write_text(yaml.safe_dump([WORKER_3]))
    env["NUMALAB_EXTRA_GUESTS"] = str(extra)
    inventory = write_inventory(tmp_path / "inventory.py")
    lab = lab_of_inventory_with_env(inventory, env)
    prometheus_url = f"http://{lab.guest('registry').address}:9090"  # the metrics stage's Prometheus
    try:
        with step("first deploy (lab up, build or cache, every stage)"):
            try:
                first = deploy(inventory, env, "first", timeout=2400)
            finally:
                first_deploy_done()  # make test's other tests start now (scripts/test-side-by-side)
        output = first.stdout + first.stderr
        assert first.returncode == 0, failed_run(output)
        assert "Kubernetes distribution: upstream" in output
        assert "Wait for Prometheus /-/ready" in output
        for worker in WORKERS:
            assert (f"verify {worker}: numa-align/numa-0=100 numa-align/numa-1=100 | cpu static, memory Static, "
                    "topology single-numa-node/pod") in output
        assert (state / "kubeconfig").stat().st_mode & 0o777 == 0o600
        assert ssh(state, "worker-1", "/usr/local/bin/kubelet --version").stdout.strip() == "Kubernetes v1.36.3"
        # The lab image trusts the cluster CA alone (numalab/lab/recipe.py), and numa-align's venv has no pip.
        bundle = ssh(state, "worker-1", "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt")
        assert bundle.stdout.strip() == "1", bundle.stdout + bundle.stderr
        venv = ssh(state, "worker-1",
                   "test -x /opt/numa-align/venv/bin/numa-align && test ! -e /opt/numa-align/venv/bin/pip")
        assert venv.returncode == 0, venv.stderr
        check_go_environment(state, lab)
        with step("worker-3 checks and preflight"):
            check_real_server_worker(state, env, inventory)
            check_top(state, env, tmp_path / "top.html")

        suite_title = f"e2e suite (etcd and kube-apiserver restarted {API_RESTART_DELAY:.0f} s into it)" \
            if EXTENDED else "e2e suite"
        with step(suite_title):
            def suite_run() -> subprocess.CompletedProcess[str]:
                return e2e(state, env, SUITE, "--prometheus-url", prometheus_url)
            suite, restart = restart_api_server_during(state, list(WORKERS), API_RESTART_DELAY, suite_run) \
                if EXTENDED else (suite_run(), None)
        note_durations("e2e", suite.stdout)
        note_outages(suite.stdout)  # an API server restart the cases waited out is shown, never hidden
        table = suite.stdout + suite.stderr
        history = guest_history(state, WORKERS)
        print(history)  # shown with any failure below; NRestarts=0 means no kubelet or control plane crashed
        assert suite.returncode == 0, failure_excerpt(table) + history
        if restart is not None:
            with fault_case("API server + etcd restart"):
                FAULTS.append(rode_through_api_restart(state, list(WORKERS), restart, suite.returncode == 0))
        for worker in WORKERS:
            for node in (0, 1):
                row = next(line.split() for line in table.splitlines()
                           if line.split()[:3] == [worker, str(node), "pinned"])
                assert row[3] == "pass" and row[5] == str(node), row  # Mems_allowed_list is node N
        assert_nrt_rows(table)  # numa-align's NodeResourceTopology counted each pinned pod (its unit's user)
        NOTES.append(assert_explain_agreement(table))  # explain's verdicts against the real kubelet's, pair by pair
        for worker in WORKERS:  # numa-align's per-cell gauge, read back through the registry host's Prometheus
            for node in (0, 1):
                row = next(line.split() for line in table.splitlines()
                           if line.split()[:3] == [worker, str(node), "prometheus"])
                assert row[3] == "pass", row
        # worker-1's audit and first fault cases, with freshness measured on worker-3 beside them: none of them
        # touches the other's node (the freshness pods are worker-3's own, the cases' pods and Node worker-1's).
        # The freshness pods take longer than worker-1's cases; its Node registered again fits in that time.
        with step("worker-1: audit, stuck Pending, drain, Node registered again; worker-3: freshness beside them"), \
                ThreadPoolExecutor(max_workers=1) as beside:
            fresh = beside.submit(freshness, state, [FRESHNESS_WORKER], PROBE_IMAGE, FRESHNESS_PODS)
            with step("audit: a cpuset changed behind the kubelet's back"):
                assert sorted(rules_loaded(prometheus_url)) == [
                    "NumaAlignAuditUnknown", "NumaAlignContainerSplit", "NumaAlignCpusetDrift"]
                NOTES.append(cpuset_drift(state, prometheus_url, "worker-1", PROBE_IMAGE))
            # Side by side: the default scheduler's pods rejected by the kubelets, the NUMA-aware one's never
            note_rows(table, "numa-scheduler")
            assert_suite_rows(table)
            inspected = ssh(state, "worker-1", "numa-align inspect --format json")
            assert inspected.returncode == 0, inspected.stderr
            report = json.loads(inspected.stdout)
            assert report["memory_manager"]["policy"] == "Static" and report["memory_manager"]["managed"]
            with step("fault: a pod stuck Pending"), fault_case("stuck Pending pod"):
                FAULTS.append(stuck_pending_pod(state, "worker-1", PROBE_IMAGE))
            # Each fault case that fails is a FAIL row and the next still runs; the test fails at its end.
            with step("fault: pods in the drain's way"), fault_case("bare pod and emptyDir pod in the drain's way"):
                FAULTS.append(pods_in_the_drains_way(state, "worker-1", PROBE_IMAGE))
            if EXTENDED:
                with step("fault: a Node deleted and registered again"), \
                        fault_case("Node deleted and registered again"):
                    FAULTS.append(node_registered_again(state, "worker-1", PROBE_IMAGE))
            with step(f"freshness: {FRESHNESS_PODS} pinned pods one at a time on {FRESHNESS_WORKER}, watched "
                      "(what was left of it after the cases above)"):
                NOTES.append(fresh.result())
        if EXTENDED:
            extended_fault_cases(state, env, lab, PROBE_IMAGE, SHRUNK_MIB)
        # CPU 3 of worker-1 taken offline (and its declared shape says so, as offline_cpus would): the next run
        # plans the reset for the CPU Manager's checkpoint too
        offline = ssh(state, "worker-1", "echo 0 > /sys/devices/system/cpu/cpu3/online; "
                                         "cat /sys/devices/system/cpu/online")
        assert offline.stdout.strip() == "0-2", offline.stdout + offline.stderr

        # Memory Manager None, and numa-align from its unit to the DaemonSet (the lab registry's image) in the
        # same run: the stale memory_manager_state is removed once; the run after changes nothing.
        none_inventory = write_inventory(tmp_path / "inventory-none.py", memory_policy="None",
                                         numa_align_install="daemonset", worker_1_offline="3",
                                         worker_1_cell_1=SHRUNK_CELL if EXTENDED else None)
        with step("fault: API unreachable during a planned reset"), \
                fault_case("API unreachable during a planned reset"):
            FAULTS.append(api_unreachable_during_a_planned_reset(
                state, list(WORKERS), lambda: deploy(none_inventory, env, "refused", timeout=900)))
        with step("Memory Manager None reset, numa-align to its DaemonSet"):
            reset = deploy(none_inventory, env, "reset", timeout=1800)
        reset_output = reset.stdout + reset.stderr
        assert reset.returncode == 0, failed_run(reset_output)
        assert "Remove /var/lib/kubelet/memory_manager_state" in reset_output
        with fault_case("CPU offlined"):  # its CPU checkpoint no longer matches the machine: said and reset too
            assert "worker-1: reset planned: /var/lib/kubelet/cpu_manager_state" in reset_output, failed_run(
                reset_output)
            cpu_state = json.loads(ssh(state, "worker-1", "cat /var/lib/kubelet/cpu_manager_state").stdout)
            assert 3 not in parse_cpulist(cpu_state["defaultCpuSet"]), cpu_state  # the kubelet started on CPUs 0-2
        assert "memory None" in reset_output
        assert "Apply the numa-align DaemonSet" in reset_output
        check_numa_align(state, "daemonset")
        with fault_case("mixed shapes under the DaemonSet"):
            check_daemonset_per_node(config.new_client_from_config(str(state / "kubeconfig")), WORKERS,
                                     lambda node: configz(state, node))
            FAULTS.append(Fault("mixed shapes under the DaemonSet",
                                "worker-1 (2 cells, reserves 1 CPU) and worker-3 (SMT, offline core, memory-only "
                                "cell, reserves 0-1) under one DaemonSet",
                                "each pod's settings entry, start log and NRT attributes equal its own kubelet's "
                                "/configz; pods Ready (registered); only labelled workers", "n/a", "nothing"))
        # One node at a time: each worker's reset ends (uncordon) before the next one's drain starts.
        marks = [reset_output.index(f"{action} {worker}") for worker in WORKERS
                 for action in ("Drain", "Uncordon")]
        assert marks == sorted(marks), marks
        memory_state = json.loads(ssh(state, "worker-3", "cat /var/lib/kubelet/memory_manager_state").stdout)
        assert memory_state["policyName"] == "None", memory_state
        # The second run of the deploy goes beside these pods: it changes nothing, so it cannot disturb them (were it
        # to plan a change, its count says so below), and the two steps' waits on the lab are spent once.
        with step("e2e pinned pods under None, numa-align as a DaemonSet, beside the second deploy (no changes)"), \
                ThreadPoolExecutor(max_workers=1) as beside:
            second = beside.submit(deploy, none_inventory, env, "again", 1800)
            pinned = e2e(state, env, PINNED_UNDER_NONE)
            again = second.result()
        note_outages(pinned.stdout)
        assert pinned.returncode == 0, failure_excerpt(pinned.stdout + pinned.stderr, 6000) + guest_history(
            state, WORKERS)
        assert "not enforced by this kubelet" in pinned.stdout + pinned.stderr
        assert_nrt_rows(pinned.stdout)  # ... and under the DaemonSet (its ServiceAccount's token)
        FAULTS.append(Fault("CPU offlined", "echo 0 > cpu3/online on worker-1 (its declared shape: offline_cpus 3)",
                            "next run planned the reset for cpu_manager_state (said why), drained, kubelet back on "
                            "CPUs 0-2; pinned pods passed on online CPUs", "within the reset run (step times)",
                            "nothing (its pods evicted through the Eviction API, as a reset does)"))
        # The second run of the deploy changed nothing: every stage is idempotent, and the reset happened once.
        assert again.returncode == 0, failed_run(again.stdout + again.stderr)
        assert changes(again) == "-", "the second run changed something: " + (again.stdout + again.stderr)[-4000:]
        # worker-1 re-cut into four cells with unequal distances and powered off and on; the run that takes
        # numa-align back to its unit (the DaemonSet and its pods go first, the unit registers again) also sets
        # worker-1's kubelet to restricted + prefer-closest-numa-nodes, then explain meets the kubelet there.
        systemd_inventory = write_inventory(tmp_path / "inventory-systemd.py", memory_policy="None", four_cells=True)
        with step("worker-1 re-cut into 4 cells with unequal distances (power cycle)"):
            boot = boot_id(state, "worker-1")
            recut = replace(lab.guest("worker-1"), topology=guest_topology("worker-1", {"numa": FOUR_CELL_NUMA}))
            NOTES.append(reshape(lab, recut))  # the inventory declares it (its lab data keeps the first shape)
            wait_booted(state, "worker-1", boot)
            distances = ssh(state, "worker-1", "cat /sys/devices/system/node/node2/distance").stdout.split()
            assert distances == ["30", "30", "10", "12"], distances  # the guest's ACPI SLIT as the domain gave it
        with step("numa-align back to its unit; worker-1 on 4 cells: restricted, prefer-closest, container scope"):
            back = deploy(systemd_inventory, env, "back", timeout=1800)
        back_output = back.stdout + back.stderr
        assert back.returncode == 0, failed_run(back_output)
        assert "Remove the numa-align DaemonSet first" in back_output
        assert ("verify worker-1: " + " ".join(f"numa-align/numa-{n}=100" for n in range(4))
                + " | cpu static, memory None, topology restricted/container") in back_output, failed_run(back_output)
        check_numa_align(state, "systemd")
        with step("e2e explain vs kubelet on the 4-cell worker (restricted + prefer-closest-numa-nodes)"):
            closest = e2e(state, env, CLOSEST)
        note_outages(closest.stdout)
        assert closest.returncode == 0, failure_excerpt(closest.stdout + closest.stderr, 6000)
        NOTES.append(assert_closest_pairs(closest.stdout + closest.stderr, "worker-1"))
        assert not FAILED, "fault cases failed:\n" + "\n".join(FAILED)
    finally:
        with step("destroy"):
            destroyed = run_numalab(inventory, env, "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert leftovers(lab) == []
