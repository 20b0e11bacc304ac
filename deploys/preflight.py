"""Preflight alone, read only: `pyinfra --dry INVENTORY deploys/preflight.py` (what `numalab preflight
INVENTORY` runs). deploys/cluster.py runs the same stage first."""

from pyinfra import host

from numalab.deploy import context
from numalab.deploy.preflight import preflight_stage

if context.role_of(host) and context.runs_pods(host):
    preflight_stage()
