"""numa-align's venv on a node: made without pip, installed by the node's own pip wheel run from the wheel
(Debian's python3-pip-whl), offline from the wheelhouse. Run for real here, on this machine's Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.api.exceptions import DeployError

from numalab.deploy.numa_align import PIP_WHEELS, install_command, pip_wheel, venv_command
from numalab.wheelhouse import wheelhouse


def test_the_newest_pip_wheel_is_taken_and_none_is_an_error_naming_the_package() -> None:
    listing = (f"{PIP_WHEELS}/pip-9.0.1-py2.py3-none-any.whl\n{PIP_WHEELS}/pip-25.1.1-py3-none-any.whl\n"
               f"{PIP_WHEELS}/pip-23.0.1-py3-none-any.whl\n")
    assert pip_wheel(listing, "worker-1") == f"{PIP_WHEELS}/pip-25.1.1-py3-none-any.whl"
    with pytest.raises(DeployError, match="worker-1: no pip wheel in /usr/share/python-wheels .*python3-pip-whl"):
        pip_wheel("", "worker-1")


def test_a_venv_without_pip_gets_numa_align_from_the_wheelhouse(tmp_path: Path) -> None:
    listing = subprocess.run(f"ls {PIP_WHEELS}/pip-*.whl", shell=True, capture_output=True, text=True).stdout
    pip = pip_wheel(listing, "this machine")  # host-prep installs python3-venv, which brings it
    wheels = wheelhouse(f"{sys.version_info[0]}.{sys.version_info[1]}", tmp_path / "cache")
    venv = tmp_path / "venv"
    python = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for command in (venv_command(str(venv)).replace("python3 ", f"{python} ", 1),
                    install_command(str(venv), str(wheels), pip)):
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert not (venv / "bin" / "pip").exists()  # the venv carries no pip of its own
    # nothing compiled at install: numa-align's first start compiles what it imports
    assert not list(venv.glob("lib/python*/site-packages/google/protobuf/**/__pycache__"))
    helped = subprocess.run([str(venv / "bin" / "numa-align"), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "serve" in helped.stdout
