"""`numalab lab destroy` removes every file the cluster stages leave in the lab's state dir, and so the
dir itself (a CI run found the policy-reset lock left behind, keeping the state dir), and the bring-up's
lock, which lives there so that it goes with the lab."""

from __future__ import annotations

from numalab.deploy import draining
from numalab.files import file_lock
from numalab.lab.provisioning import PREPARE_LOCK, LabHost
from numalab.lab.spec import lab_from_dict
from numalab.rke2.token import TOKEN_FILE


def test_destroy_leaves_no_state_dir_after_a_policy_reset(tmp_path):
    state = tmp_path / "state"
    lab = lab_from_dict({"settings": {"name": "t", "state_dir": str(state)},
                         "guests": [{"name": "g", "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi"}]}}]})
    for directory in ("keys", "seeds", "console", "pki", "wheelhouse", "rke2"):
        (state / directory).mkdir(parents=True)
    for name in ("known_hosts", "ssh_config", "kubeconfig", TOKEN_FILE):
        (state / name).write_text("x")
    with file_lock(state / f".{TOKEN_FILE}.lock"):
        pass
    with file_lock(draining.lock_path(state / "kubeconfig")):  # what a policy-change reset leaves
        pass
    with file_lock(state / PREPARE_LOCK):  # what every bring-up leaves
        pass
    removed = LabHost(lab)._remove_local_files()
    assert not state.exists(), sorted(p.name for p in state.iterdir())
    assert f"dir {state}" in removed
