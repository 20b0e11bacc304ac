"""Stage `numa_scheduler` (the control-plane host, distribution upstream, after topology_api): the
NUMA-aware scheduler (numalab.model.numa_scheduler says why a second scheduler) when `numa_scheduler` is on.

Its binary is built from the Go module proxy and cached beside the Kubernetes binaries
(numalab.k8s.scheduler, for the cluster's Kubernetes version); its rights are applied before it starts
(templates/k8s/numa-scheduler-rbac.yaml.j2, only when their checksum differs); it runs as a unit like
kube-scheduler, with its own client certificate and config, restarted when any of them changes, and
waited for on its /healthz. Turned off, its unit is stopped and removed (its rights stay: harmless
without the certificate's holder running).

Upstream's plugin ignores NodeResourceTopology objects created after it started (scheduler-plugins issue
967); numa-lab's build carries a fix (numalab/k8s/scheduler_go/nrtadopt: objects made later, or made again
for a re-registered Node, are handed to its cache; its resync counts every bound, unfinished pod; a node
marked for resync with no pod bound, which upstream never resyncs, is flushed when its object says it has
none), so the scheduler is no longer
restarted for newer objects.
It still starts only once every node has its object: a first deploy's scheduler has them all at once.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import yaml
from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.facts.files import File
from pyinfra.operations import files, python, systemd
from pyinfra.operations.util import any_changed

from numalab.deploy import api, context, controller, manifests
from numalab.deploy.control_plane import put_unit
from numalab.deploy.operations import secret_file, stamped_file
from numalab.deploy.services import running_and_current
from numalab.deploy.waiting import wait_until
from numalab.k8s.errors import BinariesError
from numalab.k8s.scheduler import scheduler_binary
from numalab.model import numa_scheduler as model
from numalab.model.components import kubeconfig_path
from numalab.pki.profiles import NUMA_SCHEDULER_USER

RBAC_TEMPLATE = "k8s/numa-scheduler-rbac.yaml.j2"
CLUSTER_ROLE = "numa-lab:numa-scheduler"
ROLES = (CLUSTER_ROLE, "system:kube-scheduler", "system:volume-scheduler")
READY_TIMEOUT = 180
NRT_TIMEOUT = 120.0
UNIT_FILE = f"/etc/systemd/system/{model.NAME}.service"


def rbac_manifest() -> str:
    bindings = {f"{CLUSTER_ROLE}:{role.split(':')[-1]}": role for role in ROLES}
    return manifests.checksummed(RBAC_TEMPLATE, user=NUMA_SCHEDULER_USER, bindings=bindings, lease=model.NAME,
                                 namespace=model.LEASE_NAMESPACE)


def config_text() -> str:
    return yaml.safe_dump(model.numa_scheduler_configuration(), sort_keys=False)



def _binary() -> Path:
    try:
        return scheduler_binary(controller.binaries_cache_root(host),
                                kubernetes_version=controller.binaries(host).version)
    except BinariesError as exc:
        raise DeployError(f"numa_scheduler: {exc}") from None


def _remove() -> None:
    if not host.get_fact(File, path=UNIT_FILE):
        host.noop("numa_scheduler is off and no NUMA-aware scheduler runs")
        return
    systemd.service(name=f"Stop {model.NAME} (numa_scheduler is off)", service=model.NAME, running=False,
                    enabled=False)
    removed = files.file(name=f"Remove {model.NAME}'s unit", path=UNIT_FILE, present=False)
    systemd.daemon_reload(name=f"Reload systemd without {model.NAME}", _if=any_changed(removed))


@deploy("numa_scheduler")
def numa_scheduler() -> None:
    """The NUMA-aware scheduler's rights, binary, kubeconfig, config and unit; waits for its /healthz."""
    if not context.runs_numa_scheduler(host):
        _remove()
        return
    kubeconfig = context.state_dir(host) / "kubeconfig"
    text = rbac_manifest()
    if manifests.cluster_role_checksum(kubeconfig, CLUSTER_ROLE) != manifests.manifest_checksum(text, "ClusterRole"):
        python.call(name=f"Apply {model.NAME}'s rights (kube-scheduler's roles, NRT reads, its Lease)",
                    function=manifests.apply, kubeconfig=kubeconfig, text=text)
    changed = [
        stamped_file(name=f"{model.NAME} binary", src=str(_binary()), dest=model.binary_path(), mode="755"),
        secret_file(name=f"{model.NAME} kubeconfig", content=controller.pki(host).read(f"{model.NAME}.conf"),
                    dest=kubeconfig_path(model.NAME)),
        files.put(name=f"{model.NAME} KubeSchedulerConfiguration (profile {model.SCHEDULER_NAME})",
                  src=StringIO(config_text()), dest=model.CONFIG, mode="644"),
    ]
    unit = put_unit(model.numa_scheduler())
    systemd.daemon_reload(name=f"Reload systemd for {model.NAME}", _if=any_changed(unit))
    nodes = list(context.cluster_of(host).node_names)
    created = api.nrt_created(kubeconfig)
    if set(nodes) - set(created) or any(op.will_change for op in (unit, *changed)):
        python.call(name=f"Wait until every node has its NodeResourceTopology before {model.NAME} (re)starts",
                    function=api.wait_nrt_objects, kubeconfig=kubeconfig, nodes=nodes, timeout=NRT_TIMEOUT)
    running_and_current(model.NAME, f"{model.NAME} enabled and running",
                        f"Restart {model.NAME} for its new binary, config or credentials", [unit, *changed])
    wait_until(
        name=f"Wait for {model.NAME} /healthz",
        check=f"curl -skf https://127.0.0.1:{model.SECURE_PORT}/healthz >/dev/null",
        timeout=READY_TIMEOUT, unit=model.NAME, node=context.node_name(host), what=model.NAME,
        _if=any_changed(unit, *changed),
    )
