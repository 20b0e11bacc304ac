"""numa-align: a kubelet device plugin that exposes each NUMA node as `numa-align/numa-N`."""

__version__ = "0.1.0"
