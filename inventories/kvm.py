"""The default KVM lab as data: `pyinfra inventories/kvm.py deploys/cluster.py` brings it up.

Each guest's NUMA shape is in the topology model's form (cells with cpus and memory, optional
distances); its vCPUs are all the cells' cpus. Lab-wide knobs come from the environment (see README):
NUMALAB_NAME, NUMALAB_STATE_DIR, NUMALAB_NETWORK (isolated|nat), NUMALAB_SUBNET,
NUMALAB_DOMAIN_TYPE (auto|kvm|qemu), NUMALAB_URI, NUMALAB_IMAGE (a cloud image path or URL), and
NUMALAB_EXTRA_GUESTS: a YAML file listing more guests in the same form (e.g. a worker shaped like your
server: threads_per_core, offline_cpus, a memory-only cell, hugepages).
"""

import os

from numalab.lab.inventory import extra_guests, pyinfra_groups
from numalab.lab.settings import settings_from_env
from numalab.lab.spec import lab_from_dict

_GUESTS = [
    {
        "name": "registry",
        "groups": ["registry"],
        "numa": {"cells": [{"id": 0, "cpus": "0", "memory": "1Gi"}]},
    },
    {
        "name": "server",
        "groups": ["rke2_servers"],
        "numa": {"cells": [{"id": 0, "cpus": "0-1", "memory": "4Gi"}]},
    },
    {
        "name": "worker-1",
        "groups": ["rke2_agents"],
        "vcpus": 4,
        "numa": {
            "cells": [
                {"id": 0, "cpus": "0-1", "memory": "2Gi"},
                {"id": 1, "cpus": "2-3", "memory": "2Gi"},
            ]
        },
    },
    {
        "name": "worker-2",
        "groups": ["rke2_agents"],
        "vcpus": 4,
        "numa": {
            "cells": [
                {"id": 0, "cpus": "0-1", "memory": "2Gi"},
                {"id": 1, "cpus": "2-3", "memory": "2Gi"},
            ]
        },
    },
]

_settings = settings_from_env(os.environ).to_dict()
_lab = lab_from_dict({"settings": _settings, "guests": _GUESTS + extra_guests(os.environ)})
_groups = pyinfra_groups(_lab)

lab_guests = _groups["lab_guests"]
registry = _groups["registry"]
rke2_servers = _groups["rke2_servers"]
rke2_agents = _groups["rke2_agents"]
