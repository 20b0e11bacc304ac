"""The cluster's deploy stages, one module each, called in order by deploys/cluster.py.

base (every host) → pki → registry → control_plane → node → kube_proxy → topology_api (the NRT CRD) and
cluster_dns (CoreDNS applied) on the control plane → numa_align → verify, metrics (Prometheus) on the registry
host, numa_scheduler on the control plane → cluster_dns_rolled_out (CoreDNS waited for, its pod started
meanwhile).
Each is a pyinfra `@deploy()` that reads facts first and changes only what differs, so a second run reports
no changes.
"""

from numalab.deploy.base import base
from numalab.deploy.cluster_dns import cluster_dns, cluster_dns_rolled_out
from numalab.deploy.control_plane import control_plane
from numalab.deploy.kube_proxy import kube_proxy
from numalab.deploy.metrics import metrics
from numalab.deploy.node import node
from numalab.deploy.numa_align import numa_align
from numalab.deploy.numa_scheduler import numa_scheduler
from numalab.deploy.pki import pki
from numalab.deploy.registry import registry
from numalab.deploy.topology_api import topology_api
from numalab.deploy.verify import verify

__all__ = ["base", "cluster_dns", "cluster_dns_rolled_out", "control_plane", "kube_proxy", "metrics", "node",
           "numa_align", "numa_scheduler", "pki", "registry", "topology_api", "verify"]
