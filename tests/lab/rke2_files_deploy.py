"""The RKE2 stages a lab test can run for real without RKE2 itself: install (from a fabricated artifact
set) and the config files. The service stage is left out on purpose: the fabricated rke2 binary cannot
start, and the tests claim nothing about a start they cannot do."""

from pyinfra import host

from numalab.deploy import context
from numalab.deploy.rke2 import rke2_config, rke2_install

if context.role_of(host):
    context.announce_distribution(host)
    rke2_install()
    rke2_config()
