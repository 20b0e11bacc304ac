"""`numalab lab destroy` removes every file the cluster stages leave in the lab's state dir, and so the
dir itself (a CI run found the policy-reset lock left behind, keeping the state dir), and the bring-up's
lock, which lives there so that it goes with the lab."""

from __future__ import annotations

import pytest

from numalab.deploy import draining
from numalab.files import file_lock
from numalab.lab import provisioning
from numalab.lab.provisioning import PREPARE_LOCK, LabHost
from numalab.lab.spec import lab_from_dict
from numalab.model.errors import ValidationError
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


def test_a_refused_subnet_leaves_no_state_dir(tmp_path, monkeypatch):
    """The subnet check comes before the bring-up's lock: a lab refused for its subnet leaves nothing, not even
    the state dir that holds the lock (the lab test test_subnet_in_use_is_refused_before_anything_is_created
    shows it against libvirt)."""
    state = tmp_path / "state"
    lab = lab_from_dict({"settings": {"name": "t", "state_dir": str(state)},
                         "guests": [{"name": "g", "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi"}]}}]})

    def overlapping(conn, name, settings):
        raise ValidationError("NUMALAB_SUBNET", f"{settings.subnet} overlaps a route")

    monkeypatch.setattr(provisioning, "check_subnet", overlapping)
    host = LabHost(lab)
    host._conn = object()  # never asked: the check is replaced
    with pytest.raises(ValidationError, match="NUMALAB_SUBNET"):
        host.prepare()
    assert not state.exists()
