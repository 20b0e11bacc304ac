"""Hugepage sizes as the kernel lists them and as the kubelet names them: the one naming numa-align and numa-lab use.

The kernel lists a node's page sizes as `hugepages/hugepages-<N>kB`, whatever sizes its architecture has: x86
2048 and 1048576 kB; arm64 with 4K pages 64, 2048, 32768 and 1048576 kB, with 64K pages 2048, 524288 and
16777216 kB. The kubelet (through cadvisor's machine info) turns each size into the resource `hugepages-<size>`,
the size written as a binary quantity in canonical form (`resource.NewQuantity(bytes, BinarySI).String()`: the
largest suffix that leaves a whole number, plain bytes below 1Ki): 64Ki, 2Mi, 32Mi, 512Mi, 1Gi, 16Gi. No size is
dropped: the kubelet reports and admits every size the kernel lists.
"""

from __future__ import annotations

RESOURCE_PREFIX = "hugepages-"
_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def size_name(size_kib: int) -> str:
    """The kubelet's name of a page size given in KiB (the kernel's unit): 64 -> "64Ki", 2048 -> "2Mi"."""
    size = size_kib * 1024
    for suffix, shift in _BINARY_SUFFIXES:
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{suffix}"
    return str(size)


def resource_name(size_kib: int) -> str:
    """The kubelet's resource for a page size in KiB: 2048 -> "hugepages-2Mi", 16777216 -> "hugepages-16Gi"."""
    return f"{RESOURCE_PREFIX}{size_name(size_kib)}"


def is_page_size(size_bytes: int) -> bool:
    """A size the kernel can have: a whole number of KiB and a power of two (a huge page is PAGE_SIZE << order)."""
    return size_bytes >= 1024 and size_bytes & (size_bytes - 1) == 0
