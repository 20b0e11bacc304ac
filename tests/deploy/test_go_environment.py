"""GOMAXPROCS for numa-lab's Go daemons: one P on a host emulated in software, Go's default elsewhere,
asked of the host once, and rendered into every unit numa-lab writes (and containerd's drop-in, etcd's file)."""

from __future__ import annotations

import configparser
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api.exceptions import DeployError

from numalab.deploy import context
from numalab.deploy.facts import Virtualization
from numalab.model import components
from numalab.model.errors import ValidationError
from numalab.render import render


@dataclass(eq=False)
class FactHost:
    """A pyinfra Host as context.go_environment reads it: name, data.get and get_fact (counted)."""

    data: dict[str, Any] = field(default_factory=dict)
    virtualization: str = "qemu"
    name: str = "@kvm/worker-1"
    asked: int = 0

    def get_fact(self, fact: type) -> str:
        assert fact is Virtualization
        self.asked += 1
        return self.virtualization


@pytest.mark.parametrize(("setting", "virtualization", "expected"), [
    (None, "qemu", components.EMULATED_GO_MAX_PROCS),  # TCG: every vCPU is a host thread on few cores
    (None, "kvm", None), (None, "none", None), (None, "", None),  # hardware or bare metal: Go's default
    (4, "qemu", 4), (2, "none", 2),  # asked for, wherever
    (0, "qemu", None),  # 0: Go's default even when emulated
])
def test_go_max_procs(setting: int | None, virtualization: str, expected: int | None) -> None:
    assert components.go_max_procs(setting, virtualization) == expected


@pytest.mark.parametrize("bad", [-1, "2", 1.5, True])
def test_a_bad_go_max_procs_is_refused_naming_the_key(bad: object) -> None:
    with pytest.raises(ValidationError, match=r"^go_max_procs: .* is not a whole number of CPUs"):
        components.go_max_procs(bad, "qemu")  # type: ignore[arg-type]


def test_the_host_is_asked_once_and_only_without_a_setting() -> None:
    emulated = FactHost()
    assert context.go_environment(emulated) == {"GOMAXPROCS": "1"}
    assert context.go_environment(emulated) == {"GOMAXPROCS": "1"} and emulated.asked == 1
    assert context.go_environment(FactHost(virtualization="kvm")) == {}
    explicit = FactHost({"go_max_procs": 0})
    assert context.go_environment(explicit) == {} and explicit.asked == 0


def test_a_bad_setting_fails_the_deploy_naming_the_host() -> None:
    with pytest.raises(DeployError, match=r"^@kvm/worker-1: go_max_procs: 'many' is not"):
        context.go_environment(FactHost({"go_max_procs": "many"}))


def parse(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    return parser


def test_units_and_the_containerd_drop_in_carry_the_environment() -> None:
    component = components.Component("kubelet", "Kubernetes node agent", ("--config=/var/lib/kubelet/config.yaml",))
    unit = parse(render("k8s/component.service.j2", component=component, environment={"GOMAXPROCS": "1"}))
    assert unit["Service"]["Environment"] == "GOMAXPROCS=1"
    assert unit["Service"]["ExecStart"].startswith("/usr/local/bin/kubelet")
    dropin = parse(render("k8s/go-environment.conf.j2", environment={"GOMAXPROCS": "1"}))
    assert dict(dropin["Service"]) == {"Environment": "GOMAXPROCS=1"}


@pytest.mark.parametrize(("says", "expected"), [("qemu", "qemu"), ("kvm", "kvm"), (None, "")])
def test_the_fact_reads_systemd_detect_virt(tmp_path: Path, says: str | None, expected: str) -> None:
    """The fact's command as the host runs it, with systemd-detect-virt saying `says` (None: not installed)."""
    if says is not None:
        tool = tmp_path / "systemd-detect-virt"
        tool.write_text(f'#!/bin/sh\n[ "$1" = --vm ] || exit 2\necho {says}\n')
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"} if says is not None else {"PATH": str(tmp_path)}
    fact = Virtualization()
    done = subprocess.run(["/bin/sh", "-c", fact.command()], capture_output=True, text=True, env=env, check=True)
    assert fact.process(done.stdout.splitlines()) == expected
