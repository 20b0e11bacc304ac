"""The RKE2 stages, beside the upstream ones (control_plane, node) and on the same shared stages (base,
pki, registry, numa_align, verify): install, config files, and the rke2-server / rke2-agent service."""

from numalab.deploy.rke2.config import rke2_config
from numalab.deploy.rke2.install import rke2_install
from numalab.deploy.rke2.service import rke2_service

__all__ = ["rke2_config", "rke2_install", "rke2_service"]
