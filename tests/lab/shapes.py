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

CLUSTER_WORKER_NUMA = {
    **REAL_SERVER_NUMA,
    "cells": [REAL_SERVER_NUMA["cells"][0], {**REAL_SERVER_NUMA["cells"][1], "offline_cpus": "6-7"},
              REAL_SERVER_NUMA["cells"][2]],
}
"""The cluster test's worker-3: the same shape with the whole core {6,7} offline, because it runs the CPU
Manager with full-pcpus-only. The kubelet's CPUsPerCore is online CPUs // cores with an online CPU, so vCPU 7
alone offline gives 7 // 4 = 1 and turns the whole-core check off; numa-lab refuses full-pcpus-only there
(numalab.model.kubelet_shape.check_whole_cores)."""

FOUR_CELL_NUMA = {
    "cells": [{"id": cell, "cpus": str(cell), "memory": "1Gi"} for cell in range(4)],
    "distances": [[10, 20, 30, 30], [20, 10, 30, 30], [30, 30, 10, 12], [30, 30, 12, 10]],
}
"""The cluster test's worker-1 re-cut into four one-CPU cells with unequal distances (two pairs of near cells, as
on a board with sub-NUMA clustering): with CPU 0 reserved, a pod of 2 CPUs fits in three 2-cell masks of the
same width, and only prefer-closest-numa-nodes makes the kubelet take cells 2 and 3 (distance 12) over the
lowest pair, 1 and 2 (distance 30)."""
