"""The lab cluster, stage by stage: `pyinfra inventories/kvm.py deploys/cluster.py`.

Every host gets `base`. When the inventory declares a cluster (groups `registry`, `rke2_servers`,
`rke2_agents`), the stages follow in order; each reads facts first, so a second run changes nothing.
Every host passes each barrier, so a stage starts only when the one before it is done on all hosts.
The distribution (`k8s_distribution`, env NUMALAB_DISTRIBUTION for the lab) decides who runs the
control plane and kubelets: `upstream` runs the binaries numa-lab builds or is given.
"""

from pyinfra import host

from numalab.deploy import base, context, control_plane, node, numa_align, pki, registry, verify
from numalab.deploy.operations import stage_barrier

base()

roles = context.role_of(host)
if roles:
    context.announce_distribution(host)
    pki()
    if "registry" in roles:
        registry()
stage_barrier(before="control plane")
if "rke2_servers" in roles:
    control_plane()
stage_barrier(before="nodes")
if roles and context.runs_pods(host):
    node()
stage_barrier(before="numa-align")
if roles and context.runs_pods(host):
    numa_align()
    verify()
