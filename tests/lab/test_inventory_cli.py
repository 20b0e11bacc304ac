"""Bad inventories are refused by pyinfra's own inventory loading, before any lab object exists."""

from __future__ import annotations

from pathlib import Path

from tests.lab.conftest import lab_env, run_pyinfra, write_inventory


def test_bad_inventory_is_refused_naming_host_and_field(tmp_path: Path) -> None:
    bad = {
        "name": "bad",
        "numa": {"cells": [{"id": 0, "cpus": "0-1", "memory": "1Gi"}, {"id": 1, "cpus": "1-2", "memory": "1Gi"}]},
    }
    env = lab_env("pytest-bad", tmp_path / "state", "10.77.0.0/24")
    inventory = write_inventory(tmp_path / "inventory.py", [bad])
    result = run_pyinfra(inventory, env, "exec", "--", "true")
    assert result.returncode != 0
    assert "bad.numa.cells[1].cpus" in result.stdout + result.stderr
    assert not (tmp_path / "state").exists()


def test_duplicate_addresses_are_refused_naming_host_and_field(tmp_path: Path) -> None:
    guests = [
        {"name": "a", "vcpus": 1, "memory": "512Mi", "address": "10.77.0.20"},
        {"name": "b", "vcpus": 1, "memory": "512Mi", "address": "10.77.0.20"},
    ]
    env = lab_env("pytest-dup", tmp_path / "state", "10.77.0.0/24")
    result = run_pyinfra(write_inventory(tmp_path / "inventory.py", guests), env, "exec", "--", "true")
    assert result.returncode != 0
    assert "b.address: 10.77.0.20 is also the address of a" in result.stdout + result.stderr
    assert not (tmp_path / "state").exists()
