"""Stage `numa_align` (every host that runs pods): the numa-align device plugin.

`numa_align_install: systemd` (default): a wheelhouse built on the controller for the node's Python is
uploaded and installed into a venv at /opt/numa-align, run by the unit from templates/plugin/, and
restarted when the wheels or its settings change. `daemonset`: the DaemonSet manifests from
templates/plugin/ are applied with the image the user names (`numa_align_image`) when they differ from
what is live (image, settings or manifest); a settings change rolls the pods.
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.facts.server import Command
from pyinfra.operations import files, python, server, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import context, manifests
from numalab.deploy.policy import node_policy
from numalab.deploy.wheelhouse import wheelhouse
from numalab.model.errors import ValidationError
from numalab.model.plugin_settings import plugin_settings as settings_for
from numalab.render import render

PREFIX = "/opt/numa-align"
WHEELS = f"{PREFIX}/wheels"
VENV = f"{PREFIX}/venv"


def plugin_settings() -> dict[str, str]:
    """numa_align_settings with NUMA_RESERVED_CPUS from this node's kubelet policy."""
    try:
        return settings_for(host.data.get("numa_align_settings"), node_policy().reserved_cpus)
    except ValidationError as exc:
        raise DeployError(f"{host.name}: {exc}") from None


def _systemd_install() -> None:
    python_version = host.get_fact(Command, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    if not python_version:
        raise DeployError(f"{host.name}: no python3 on the node (numa-align runs in a venv of the node's Python)")
    wheels = wheelhouse(python_version.strip(), context.state_dir(host) / "wheelhouse")
    files.directory(name="numa-align wheel dir", path=WHEELS, mode="755")
    uploads = [
        files.put(name=f"numa-align wheel {wheel.name}", src=str(wheel), dest=f"{WHEELS}/{wheel.name}", mode="644")
        for wheel in sorted(wheels.iterdir())
    ]
    stale = sorted({*_remote_wheels()} - {wheel.name for wheel in wheels.iterdir()})
    for name in stale:
        files.file(name=f"Remove old wheel {name}", path=f"{WHEELS}/{name}", present=False)
    changes = list(uploads)
    if not _venv_exists():
        changes.append(server.shell(name="numa-align venv", commands=[f"python3 -m venv {VENV}"]))
    install = server.shell(
        name="Install numa-align from the uploaded wheels (no index)",
        commands=[f"{VENV}/bin/pip install --no-index --find-links {WHEELS} --force-reinstall -q numa-align"],
        _if=any_changed(*changes),
    )
    files.link(name="numa-align on PATH (for `numa-align inspect`)", path="/usr/local/bin/numa-align",
               target=f"{VENV}/bin/numa-align")
    unit = files.put(
        name="numa-align unit",
        src=StringIO(render("plugin/numa-align.service.j2", exec_start=f"{VENV}/bin/numa-align serve",
                            env=plugin_settings())),
        dest="/etc/systemd/system/numa-align.service", mode="644",
    )
    systemd.daemon_reload(name="Reload systemd for numa-align", _if=any_changed(unit))
    systemd.service(name="numa-align enabled and running", service="numa-align", running=True, enabled=True)
    systemd.service(name="Restart numa-align for its new wheels or settings", service="numa-align",
                    restarted=True, _if=any_changed(install, unit))


def _remote_wheels() -> list[str]:
    listing = host.get_fact(Command, f"ls {WHEELS} 2>/dev/null || true")
    return [name for name in (listing or "").split() if name.endswith(".whl")]


def _venv_exists() -> bool:
    return bool(host.get_fact(Command, f"test -x {VENV}/bin/pip && echo yes || true"))


def _daemonset_install() -> None:
    image = host.data.get("numa_align_image")
    if not image:
        raise DeployError(f"{host.name}: numa_align_install is daemonset but numa_align_image names no image")
    cluster = context.cluster_of(host)
    if context.node_name(host) != cluster.node_names[0]:
        return  # one host applies the cluster-wide DaemonSet
    kubeconfig = context.state_dir(host) / "kubeconfig"
    text = manifests.numa_align_daemonset(str(image), plugin_settings())
    if not manifests.needs_apply(text, manifests.live_state(kubeconfig)):
        host.noop(f"the numa-align DaemonSet already runs {image} with these settings")
        return
    python.call(name="Apply the numa-align DaemonSet (its pods roll on a new image or settings)",
                function=manifests.apply, kubeconfig=kubeconfig, text=text)


@deploy("numa_align")
def numa_align() -> None:
    """numa-align on this node, installed as the host data says."""
    if context.numa_align_install(host) == "systemd":
        _systemd_install()
    else:
        _daemonset_install()
