"""The lab cluster, stage by stage: `pyinfra inventories/kvm.py deploys/cluster.py`.

Hosts that run pods are judged first (`preflight`: a host the kubelet would refuse fails the run before
anything is changed). Every host gets `base`. When the inventory declares a cluster (groups `registry`, `rke2_servers`,
`rke2_agents`), the stages follow in order; each reads facts first, so a second run changes nothing.
Every host passes each barrier, so a stage starts only when the one before it is done on all hosts.
The nodes the cluster already has that reset a manager policy run their node stage one after another, the
others at once (numalab.deploy.policy_reset).
The distribution (`k8s_distribution`, env NUMALAB_DISTRIBUTION for the lab) decides who runs the
control plane and kubelets: `upstream` runs the binaries numa-lab builds or is given (and kube-proxy and
CoreDNS for Services and cluster DNS); `rke2` installs
RKE2 (online, airgap or preinstalled), writes its config files and starts rke2-server, then rke2-agent.
With `numa_metrics` (on in an upstream lab) the registry host runs Prometheus, scraping every node's numa-align.
"""

from pyinfra import host

from numalab.deploy import (
    base,
    cluster_dns,
    cluster_dns_rolled_out,
    context,
    control_plane,
    kube_proxy,
    metrics,
    node,
    numa_align,
    numa_scheduler,
    pki,
    registry,
    topology_api,
    verify,
)
from numalab.deploy.node import planned_reset as planned_node_reset
from numalab.deploy.operations import stage_barrier
from numalab.deploy.policy_reset import one_node_at_a_time
from numalab.deploy.preflight import preflight_stage
from numalab.deploy.rke2 import rke2_config, rke2_install, rke2_service
from numalab.deploy.rke2.config import planned_reset as planned_rke2_reset

roles = context.role_of(host)
if roles and context.runs_pods(host):
    preflight_stage()  # a host the kubelet would refuse fails the run before any change
base()

distribution = context.announce_distribution(host) if roles else None
if roles:
    pki()
    if "registry" in roles:
        registry()
stage_barrier(before="control plane")
if "rke2_servers" in roles:
    if distribution == "rke2":
        installed = rke2_install()
        rke2_service(rke2_config(), installed)
    else:
        control_plane()
stage_barrier(before="nodes")


def node_stage(reset: list[str]) -> None:
    if distribution == "upstream":
        node(reset)
        kube_proxy()
    elif "rke2_agents" in roles:
        installed = rke2_install()
        rke2_service(rke2_config(reset), installed)


if roles and context.runs_pods(host):
    reset = planned_node_reset() if distribution == "upstream" else planned_rke2_reset()
    one_node_at_a_time(lambda: node_stage(reset), reset)  # nodes that reset in turn, each drained alone
dns_rollout = False
if "rke2_servers" in roles:
    topology_api(distribution)  # the NodeResourceTopology CRD and numa-align's rights, before it publishes
    if distribution == "upstream":
        dns_rollout = cluster_dns()  # RKE2 ships its own CoreDNS and kube-proxy; its rollout is waited for last
stage_barrier(before="numa-align")
if roles and context.runs_pods(host):
    numa_align()
    verify()
if "registry" in roles:
    metrics()  # Prometheus scraping every node's numa-align (numa_metrics)
stage_barrier(before="the NUMA-aware scheduler")  # numa-align runs on every node: their NRT objects come next
if "rke2_servers" in roles:
    numa_scheduler()  # starts once every node published its NodeResourceTopology
if dns_rollout:
    cluster_dns_rolled_out()  # CoreDNS's pod started while the stages above ran
