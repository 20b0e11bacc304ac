"""numa-lab: NUMA-aware Kubernetes as code."""

__version__ = "0.1.0"
