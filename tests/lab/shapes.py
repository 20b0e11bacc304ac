"""A real server's NUMA shape, small enough for a lab guest: cell 0 holds cores {0,1} {2,3} and 32 hugepages
of 2 MiB; cell 1 holds {4,5} {6,7} with vCPU 7 offline (as after nosmt or a hot-unplug); cell 2 has memory
and no CPU (as CXL or GPU memory). The guest-shape tests render it; the cluster test runs a worker of it."""

REAL_SERVER_NUMA = {
    "threads_per_core": 2,
    "cells": [
        {"id": 0, "cpus": "0-3", "memory": "2Gi", "hugepages": {"2Mi": 32}},
        {"id": 1, "cpus": "4-7", "offline_cpus": "7", "memory": "1536Mi"},
        {"id": 2, "memory": "512Mi"},
    ],
}
