"""What each process of the fleet control plane is started with: command lines and config files. No I/O.

The control plane is the lab's (numalab.model.components) cut to what a simulation of Deployments on kwok
nodes needs, on loopback ports in one directory (`Layout`):
- etcd without fsync (a throwaway store; fsyncs would also disturb the timing-sensitive KVM lab on this host);
- kube-apiserver with admission cut to NamespaceLifecycle and Priority: TaintNodesByCondition would taint every
  new Node not-ready and only the node lifecycle controller, which does not run here, would lift it;
- kube-controller-manager with only the controllers Deployments need and the terminated-pod collector (no node
  lifecycle controller: a kwok node is never tainted unreachable), each under its own service account as in the
  lab;
- kube-scheduler as shipped, and one numa-scheduler per scoring strategy, each its own schedulerName, all
  retrying unschedulable pods after UNSCHEDULABLE_RETRY;
- kwok's controller, managing only nodes annotated kwok.x-k8s.io/node=fake and never touching pods
  (KWOK_POD_STAGE says how).
Schedulers, controller-manager and kwok serve one loopback certificate of the fleet's CA, and /metrics
without credentials (loopback only), so the bench reads them like /healthz.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from numalab.model import numa_scheduler
from numalab.model.components import SERVICE_ACCOUNT_ISSUER
from numalab.pki.spec import DEFAULT_SERVICE_CIDR

HOST = "127.0.0.1"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_SELECTOR = f"{KWOK_ANNOTATION}=fake"
CONTROLLERS = ("deployment", "replicaset", "podgc")
"""Deployments' two, and the terminated-pod garbage collector at its upstream threshold (12,500): a Deployment
replica the kubelet rejects stays Failed and its ReplicaSet makes another, which the default scheduler may bind
where it is rejected again; without the collector those Failed pods would pile up in etcd and every watch cache
for as long as a bench side runs, which no cluster does."""
ADMISSION_ON = ("NamespaceLifecycle", "Priority")
ADMISSION_OFF = (
    "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity", "DefaultTolerationSeconds",
    "DefaultStorageClass", "StorageObjectInUseProtection", "PodGroupProtection", "PersistentVolumeClaimResize",
    "RuntimeClass", "CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction", "DefaultIngressClass", "PodTopologyLabels", "PodGroupWorkloadExists",
    "NodeDeclaredFeatureValidator", "JobValidation", "PodResizeValidator", "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
)
"""kube-apiserver v1.36.3's default-on plugins (its --help) other than ADMISSION_ON."""
DELETE_COLLECTION_WORKERS = 4
"""Upstream deletes a collection one object at a time; a bench empties the fleet of thousands of pods between
two sides in one request."""
MAX_REQUESTS_INFLIGHT = 3000
MAX_MUTATING_REQUESTS_INFLIGHT = 1000
"""Upstream's 400/200 are sized for a few hundred kubelets; 5,000 kwok nodes renew a Lease each every 10 s and
patch their status every 20-45 s beside the schedulers' binds. Set high so that the apiserver's throttle (429s)
is never what a run measures; the machine's two cores are."""
CONTROLLER_MANAGER_QPS, CONTROLLER_MANAGER_BURST = 200, 400
"""Upstream's 20/30 caps the replicaset controller at 20 pod creations a second, slower than a burst of
Deployments should arrive; the schedulers keep their own defaults (50/100), the same for each, so the
comparison is fair."""
ALWAYS_ALLOWED = "/healthz,/readyz,/livez,/metrics"
ETCD_QUOTA_BYTES = 8 * 1024**3  # etcd's largest recommended; 5,000 nodes' objects are far below it
UNSCHEDULABLE_RETRY = "10s"
"""--pod-max-in-unschedulable-pods-duration of every scheduler here, kube-scheduler's too (the same for each, so
the comparison is fair): a pod turned away waits at most this long before it is tried again without a cluster
event. The lab's numa-scheduler waits 30 s (numalab.model.numa_scheduler.UNSCHEDULABLE_RETRY says why); the bench
calls a fleet full only once no pod was admitted for longer than this and a resync (numalab.fleet.filling), so a
shorter wait makes each side end sooner."""
VERBOSITY = 0
"""klog -v of the numa-schedulers: kube-scheduler's default, so both log alike. The lab's 2 (numalab.model.
numa_scheduler.VERBOSITY) logs a line per node and pod scored: 120,000 lines (28 MB) for one side at 100 nodes,
a hundred times more at 1,000, work a side would be measured doing. At 2 the plugin's cache says when it resyncs
a node ("flushing") and what it reserved ("post reserve"), which the small fleet's test reads."""
NODE_LEASE_SECONDS = 40  # the kubelet's nodeLeaseDurationSeconds: kwok renews each Lease every 10 s

KWOK_POD_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "pods-belong-to-the-simulated-kubelet"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        # Every stored object has a uid, so no pod ever matches: kwok's pod controller skips each one.
        "selector": {"matchExpressions": [{"key": ".metadata.uid", "operator": "DoesNotExist"}]},
        "next": {},
    },
}
"""Why a Pod stage at all: kwok v0.7.0 (pkg/kwok/cmd/root.go) plays its default pod stages (pod-ready,
pod-complete, pod-delete) whenever its configuration holds no Pod stage; one that never matches replaces
them, while its Node stages stay kwok's defaults (node-initialize, heartbeat). Pod status is left to
numa-lab's simulated kubelet."""


@dataclass(frozen=True)
class Layout:
    """The files of one control plane under `root`."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    def log(self, process: str) -> Path:
        return self.root / f"{process}.log"

    def kubeconfig(self, user: str) -> Path:
        return self.root / f"{user}.conf"

    def config(self, process: str) -> Path:
        return self.root / f"{process}.yaml"

    def pem(self, name: str) -> Path:
        return self.pki / name


def url(port: int, scheme: str = "https") -> str:
    return f"{scheme}://{HOST}:{port}"


def numa_process(strategy: str) -> str:
    """The process (and port) name of the numa-scheduler scoring by `strategy`."""
    return f"numa-scheduler-{strategy.lower()}"


def numa_scheduler_name(strategy: str) -> str:
    """The schedulerName pods set to be placed by the numa-scheduler scoring by `strategy`."""
    return f"{numa_scheduler.SCHEDULER_NAME}-{strategy.lower()}"


def etcd_args(binary: Path, layout: Layout, client_port: int, peer_port: int) -> list[str]:
    peer = url(peer_port, "http")
    return [str(binary), "--name=fleet", f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={url(client_port, 'http')}", f"--advertise-client-urls={url(client_port, 'http')}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=fleet={peer}",
            "--unsafe-no-fsync=true", f"--quota-backend-bytes={ETCD_QUOTA_BYTES}", "--log-level=warn"]


def apiserver_args(binary: Path, layout: Layout, port: int, etcd_port: int) -> list[str]:
    pem = layout.pem
    return [
        str(binary), f"--advertise-address={HOST}", f"--bind-address={HOST}", f"--secure-port={port}",
        f"--etcd-servers={url(etcd_port, 'http')}", "--authorization-mode=RBAC",
        f"--client-ca-file={pem('ca.crt')}", f"--tls-cert-file={pem('apiserver.crt')}",
        f"--tls-private-key-file={pem('apiserver.key')}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}", f"--service-account-key-file={pem('sa.pub')}",
        f"--service-account-signing-key-file={pem('sa.key')}", f"--service-cluster-ip-range={DEFAULT_SERVICE_CIDR}",
        f"--enable-admission-plugins={','.join(ADMISSION_ON)}",
        f"--disable-admission-plugins={','.join(ADMISSION_OFF)}",
        # No Endpoints for the `kubernetes` Service: a loopback address is invalid there, and no pod runs.
        "--endpoint-reconciler-type=none",
        f"--max-requests-inflight={MAX_REQUESTS_INFLIGHT}",
        f"--max-mutating-requests-inflight={MAX_MUTATING_REQUESTS_INFLIGHT}",
        f"--delete-collection-workers={DELETE_COLLECTION_WORKERS}",
    ]


def _serving(layout: Layout, port: int, kubeconfig: Path) -> list[str]:
    """Flags every Go component serving /healthz and /metrics on loopback shares."""
    return [f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--authorization-always-allow-paths={ALWAYS_ALLOWED}", f"--bind-address={HOST}",
            f"--secure-port={port}", f"--tls-cert-file={layout.pem('loopback.crt')}",
            f"--tls-private-key-file={layout.pem('loopback.key')}"]


def controller_manager_args(binary: Path, layout: Layout, port: int, controllers: tuple[str, ...]) -> list[str]:
    conf = layout.kubeconfig("controller-manager")
    return [str(binary), f"--kubeconfig={conf}", *_serving(layout, port, conf),
            f"--controllers={','.join(controllers)}", "--leader-elect=false",
            "--use-service-account-credentials=true", f"--root-ca-file={layout.pem('ca.crt')}",
            f"--kube-api-qps={CONTROLLER_MANAGER_QPS}", f"--kube-api-burst={CONTROLLER_MANAGER_BURST}"]


def scheduler_args(binary: Path, layout: Layout, port: int) -> list[str]:
    conf = layout.kubeconfig("scheduler")
    return [str(binary), f"--kubeconfig={conf}", *_serving(layout, port, conf), "--leader-elect=false",
            f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY}"]


def numa_scheduler_args(binary: Path, layout: Layout, port: int, strategy: str,
                        verbosity: int = VERBOSITY) -> list[str]:
    conf = layout.kubeconfig("numa-scheduler")
    return [str(binary), f"--config={layout.config(numa_process(strategy))}", *_serving(layout, port, conf),
            f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY}", f"--v={verbosity}"]


def numa_scheduler_config(layout: Layout, strategy: str, resync_seconds: int | None = None) -> str:
    """The lab's KubeSchedulerConfiguration with `strategy`, its own schedulerName, no leader election; and, when
    given, another period for the plugin's cache resync (the lab's: numa_scheduler.RESYNC_SECONDS)."""
    document = numa_scheduler.numa_scheduler_configuration(
        strategy, scheduler_name=numa_scheduler_name(strategy),
        kubeconfig=str(layout.kubeconfig("numa-scheduler")), leader_elect=False)
    if resync_seconds is not None:
        document["profiles"][0]["pluginConfig"][0]["args"]["cacheResyncPeriodSeconds"] = resync_seconds
    return yaml.safe_dump(document, sort_keys=False)


def kwok_args(binary: Path, layout: Layout, port: int, lease_seconds: int = NODE_LEASE_SECONDS) -> list[str]:
    return [str(binary), f"--kubeconfig={layout.kubeconfig('admin')}", f"--config={layout.config('kwok')}",
            f"--manage-nodes-with-annotation-selector={KWOK_SELECTOR}", f"--server-address={HOST}:{port}",
            f"--tls-cert-file={layout.pem('loopback.crt')}", f"--tls-private-key-file={layout.pem('loopback.key')}",
            f"--node-lease-duration-seconds={lease_seconds}"]


def kwok_config() -> str:
    """kwok's --config: no debugging or profiling handlers (exec, logs) on its server, and KWOK_POD_STAGE."""
    options = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
               "options": {"enableDebuggingHandlers": False, "enableProfilingHandler": False}}
    return yaml.safe_dump_all([options, KWOK_POD_STAGE], sort_keys=False)
