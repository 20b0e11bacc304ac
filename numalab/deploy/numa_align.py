"""Stage `numa_align` (every host that runs pods): the numa-align device plugin.

`numa_align_install: systemd` (default): a wheelhouse built on the controller for the node's Python is
uploaded and installed into a venv at /opt/numa-align, run by the unit from templates/plugin/, and
restarted when the wheels or its settings change. `daemonset`: the DaemonSet manifests from
templates/plugin/ are applied with the image the user names (`numa_align_image`; in an inventory with a
registry, the lab's own numa-lab/numa-align image by digest) when they differ from what is live (image,
settings or manifest); a settings change rolls the pods. Each node's pod runs with that node's own settings
(its kubelet's reserved CPUs, topology policy and scope: one ConfigMap file holds every node's entry), only
on the nodes numa-lab labels (its kubelets), and is ready once registered with its kubelet.

Switching one way removes the other first, so two plugins never serve the same node: to daemonset, each
node's unit is stopped and its unit file, venv and link removed; to systemd, the DaemonSet and its objects
are deleted and its last pod waited for (each pod removes its sockets as it stops).
"""

from __future__ import annotations

from io import StringIO
from pathlib import PurePosixPath

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.context import ctx_host
from pyinfra.facts.files import File
from pyinfra.facts.server import Command
from pyinfra.operations import files, python, server, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import api, context, controller, manifests
from numalab.deploy.operations import secret_file
from numalab.deploy.policy import node_policy
from numalab.deploy.services import running_and_current
from numalab.images.lab_images import lab_image_reference
from numalab.model.errors import ValidationError
from numalab.model.plugin_settings import DaemonSetSettings, daemonset_settings, nrt_settings
from numalab.model.plugin_settings import plugin_settings as settings_for
from numalab.render import render
from numalab.wheelhouse import wheelhouse

PREFIX = "/opt/numa-align"
WHEELS = f"{PREFIX}/wheels"
VENV = f"{PREFIX}/venv"
UNIT_FILE = "/etc/systemd/system/numa-align.service"
KUBECONFIG = "/etc/numa-align/kubeconfig"
LINK = "/usr/local/bin/numa-align"
SWITCH_TIMEOUT = 180.0
READY_TIMEOUT = 300.0
IMAGE_KEY = "numa-align"
# Debian's and Ubuntu's pip wheel (python3-pip-whl, which python3-venv depends on). The venv is made without
# pip and this pip, run from its wheel, installs into it: ensurepip's copy of pip into the venv took 67 s of
# a lab deploy under software emulation, for a pip the venv never uses again.
PIP_WHEELS = "/usr/share/python-wheels"


def plugin_settings(kubeconfig: str | None = None) -> dict[str, str]:
    """numa_align_settings with NUMA_RESERVED_CPUS from this node's kubelet policy, and (numa_align_nrt on)
    what makes it publish its NodeResourceTopology: the kubelet's topology manager policy and scope, and for
    the unit its kubeconfig and node name."""
    policy = node_policy()
    try:
        settings = settings_for(host.data.get("numa_align_settings"), policy.reserved_cpus)
    except ValidationError as exc:
        raise DeployError(f"{host.name}: {exc}") from None
    if context.publishes_nrt(host):
        node_name = context.node_name(host) if kubeconfig else None
        settings |= nrt_settings(policy.topology_manager_policy, policy.topology_manager_scope, kubeconfig, node_name)
    return settings


def _applies_cluster_objects() -> bool:
    """One host (the first node by name) applies or deletes the cluster-wide DaemonSet."""
    return context.node_name(host) == context.cluster_of(host).node_names[0]


def _systemd_install() -> None:
    kubeconfig = context.state_dir(host) / "kubeconfig"
    if _applies_cluster_objects() and manifests.numa_align_present(kubeconfig):
        python.call(name="Remove the numa-align DaemonSet first (numa_align_install is systemd)",
                    function=manifests.remove_numa_align, kubeconfig=kubeconfig, timeout=SWITCH_TIMEOUT)
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
        changes.append(server.shell(name="numa-align venv (without pip)", commands=[venv_command(VENV)]))
    install = server.shell(
        name="Install numa-align from the uploaded wheels (no index)",
        commands=[install_command(VENV, WHEELS, _pip_wheel())],
        _if=any_changed(*changes),
    )
    files.link(name="numa-align on PATH (for `numa-align inspect`)", path=LINK,
               target=f"{VENV}/bin/numa-align")
    credentials = []
    if context.publishes_nrt(host):  # upstream only (context.publishes_nrt): numa-lab's PKI issued its user
        files.directory(name="numa-align config dir", path=str(PurePosixPath(KUBECONFIG).parent), mode="700")
        credentials.append(secret_file(name="numa-align kubeconfig (publishes NodeResourceTopology)",
                                       content=controller.pki(host).read("numa-align.conf"), dest=KUBECONFIG))
    unit = files.put(
        name="numa-align unit",
        src=StringIO(render("plugin/numa-align.service.j2", exec_start=f"{VENV}/bin/numa-align serve",
                            env=plugin_settings(KUBECONFIG))),
        dest=UNIT_FILE, mode="644",
    )
    systemd.daemon_reload(name="Reload systemd for numa-align", _if=any_changed(unit))
    # Not when this run starts it: it runs the new wheels and settings already (a restart would only drop its
    # registration for the seconds it takes to come back).
    running_and_current("numa-align", "numa-align enabled and running",
                        "Restart numa-align for its new wheels or settings", [install, unit, *credentials])


def _remote_wheels() -> list[str]:
    listing = host.get_fact(Command, f"ls {WHEELS} 2>/dev/null || true")
    return [name for name in (listing or "").split() if name.endswith(".whl")]


def _venv_exists() -> bool:
    return bool(host.get_fact(Command, f"test -x {VENV}/bin/python && echo yes || true"))


def venv_command(venv: str) -> str:
    return f"python3 -m venv --without-pip {venv}"


def install_command(venv: str, wheels: str, pip_wheel: str) -> str:
    """The node's pip, run from its wheel by the venv's Python (so it installs there), offline. No bytecode
    at install: pip would compile every module of grpcio and protobuf (8 of the install's 31 s under software
    emulation); numa-align's first start compiles, once, the few it imports."""
    return (f"{venv}/bin/python {pip_wheel}/pip install --no-index --find-links {wheels} --force-reinstall "
            f"--no-compile -q numa-align")


def pip_wheel(listing: str | None, host_name: str) -> str:
    """The newest pip wheel `ls PIP_WHEELS/pip-*.whl` listed; an error naming the package when there is none."""
    found = sorted((line.strip() for line in (listing or "").splitlines() if line.strip().endswith(".whl")),
                   key=_wheel_version)
    if not found:
        raise DeployError(f"{host_name}: no pip wheel in {PIP_WHEELS} (Debian's python3-pip-whl, which python3-venv "
                          "depends on): numa-align's venv is installed with it")
    return found[-1]


def _wheel_version(path: str) -> tuple[int, ...]:
    version = PurePosixPath(path).name.split("-")[1]
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def _pip_wheel() -> str:
    return pip_wheel(host.get_fact(Command, f"ls {PIP_WHEELS}/pip-*.whl 2>/dev/null || true"), host.name)


def _remove_systemd_install() -> None:
    """The unit stopped and disabled, its file, the venv and the link gone: only when the unit is there."""
    if not host.get_fact(File, path=UNIT_FILE):
        return
    systemd.service(name="Stop numa-align's unit (numa_align_install is daemonset)", service="numa-align",
                    running=False, enabled=False)
    removed = files.file(name="Remove numa-align's unit file", path=UNIT_FILE, present=False)
    systemd.daemon_reload(name="Reload systemd without numa-align", _if=any_changed(removed))
    files.link(name="Remove numa-align from PATH", path=LINK, present=False)
    files.directory(name=f"Remove {PREFIX} (venv and wheels)", path=PREFIX, present=False)
    files.directory(name="Remove numa-align's kubeconfig", path=str(PurePosixPath(KUBECONFIG).parent), present=False)


def daemonset_image() -> str:
    """`numa_align_image`, else the lab registry's numa-lab/numa-align pinned by digest."""
    image = host.data.get("numa_align_image")
    if image:
        return str(image)
    registry = context.cluster_of(host).registry_endpoint
    if registry is None:
        raise DeployError(f"{host.name}: numa_align_install is daemonset but numa_align_image names no image "
                          "(and the inventory has no registry host to serve numa-lab's own)")
    return lab_image_reference(registry, IMAGE_KEY, controller.binaries(host).version)


def _every_node_settings() -> DaemonSetSettings:
    """Every node's own settings, each computed as that node's own stage computes them (its facts, its kubelet
    policy: pyinfra's host switched to it), for the one DaemonSet that serves them all."""
    cluster = context.cluster_of(host)
    others = {context.node_name(other): other for group in context.CLUSTER_GROUPS
              for other in host.inventory.get_group(group, [])}
    per_node = {}
    for name in cluster.node_names:
        with ctx_host.use(others[name]):
            per_node[name] = plugin_settings()
    try:
        return daemonset_settings(per_node)
    except ValidationError as exc:
        raise DeployError(f"inventory: {exc}") from None


def _daemonset_install() -> None:
    _remove_systemd_install()
    if not _applies_cluster_objects():
        return  # one host applies the cluster-wide DaemonSet
    image = daemonset_image()
    kubeconfig = context.state_dir(host) / "kubeconfig"
    every = _every_node_settings()
    nodes = sorted(every.nodes)
    unlabelled = manifests.nodes_to_label(kubeconfig, nodes)
    if unlabelled:
        python.call(name=f"Label {', '.join(unlabelled)} {manifests.NODE_LABEL}={manifests.NODE_LABEL_VALUE} "
                         "(the numa-align DaemonSet's nodes)",
                    function=manifests.label_nodes, kubeconfig=kubeconfig, nodes=unlabelled)
    text = manifests.numa_align_daemonset(image, every, nrt=context.publishes_nrt(host))
    if not manifests.needs_apply(text, manifests.live_state(kubeconfig)):
        host.noop(f"the numa-align DaemonSet already runs {image} with these settings")
        return
    python.call(name="Apply the numa-align DaemonSet (its pods roll on a new image or settings)",
                function=manifests.apply, kubeconfig=kubeconfig, text=text)
    python.call(name="Wait until a numa-align pod runs the new template on every node, registered",
                function=api.wait_daemonset_ready, kubeconfig=kubeconfig, namespace=manifests.NAMESPACE,
                daemonset=manifests.NAME, timeout=READY_TIMEOUT, nodes=len(nodes))


@deploy("numa_align")
def numa_align() -> None:
    """numa-align on this node, installed as the host data says."""
    if context.numa_align_install(host) == "systemd":
        _systemd_install()
    else:
        _daemonset_install()
