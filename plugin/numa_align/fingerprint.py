"""The scheduler's pod-set fingerprint, computed the way github.com/k8stopologyawareschedwg/podfingerprint does.

NodeResourceTopologyMatch (kubernetes-sigs/scheduler-plugins) keeps its own count of what it placed on a node
and only trusts a newer NRT object again when the object's `nodeTopologyPodsFingerprint` equals the
fingerprint of the pods the scheduler sees on that node, so the value must match the Go package (v0.2.2, the
version scheduler-plugins requires) byte for byte.

The definition (podfingerprint.go): each pod is XXH64(name, seed=XXH64(namespace, seed=0)) over the UTF-8
bytes, with no separator; the pod hashes are sorted as unsigned integers and written as 8 little-endian bytes
each into one XXH64 with seed 0; the result is "pfp0" + "v001" + the 8 digest bytes big-endian in lowercase
hex (16 digits, zero padded). Pods are not deduplicated: adding one twice changes the value. The empty set
is "pfp0v001ef46db3751d8e999" (XXH64 of no bytes). XXH64 comes from PyPI's `xxhash` (the reference C
library), whose seed is the full unsigned 64-bit one github.com/OneOfOne/xxhash's ChecksumString64S takes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from xxhash import xxh64_hexdigest, xxh64_intdigest

from numa_align.api import podresources_v1_pb2 as pb

PREFIX = "pfp0"
VERSION = "v001"
ATTRIBUTE = "nodeTopologyPodsFingerprint"
"""NRT top-level attribute holding the fingerprint (podfingerprint.Attribute)."""
ATTRIBUTE_METHOD = "nodeTopologyPodsFingerprintMethod"
"""NRT top-level attribute saying which pods the fingerprint covers (podfingerprint.AttributeMethod)."""
ANNOTATION = "topology.node.k8s.io/fingerprint"
"""Legacy place of the fingerprint; the scheduler reads it only when the attribute is absent."""
METHOD_ALL = "all"
"""Every pod on the node: numa-align's, over every pod the kubelet's PodResources List returns (admitted, not
terminated). numa-lab's scheduler build then counts every pod bound to the node whose phase is neither
Succeeded nor Failed (upstream's shared informer: Running ones only), so a pod bound but not yet admitted
holds the node out of resync, keeping its reservation, until the object shows it."""
SCHEDULER_COUNTED = "status.phase!=Succeeded,status.phase!=Failed"
"""Field selector of the bound pods numa-lab's scheduler counts for METHOD_ALL (add spec.nodeName for one node):
what a fingerprint is checked against outside the scheduler (e2e, the cluster test)."""
METHOD_WITH_EXCLUSIVE_RESOURCES = "with-exclusive-resources"
"""Only pods holding exclusive resources. The scheduler honours it with resync method Autodetect (the
default) or OnlyExclusiveResources and decides from each pod's spec (see `fingerprint_pods`)."""
METHODS = (METHOD_ALL, METHOD_WITH_EXCLUSIVE_RESOURCES)


def pod_hash(namespace: str, name: str) -> int:
    """One pod's 64-bit hash: the namespace's hash seeds the name's."""
    return xxh64_intdigest(name.encode(), seed=xxh64_intdigest(namespace.encode()))


def pod_fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The fingerprint of (namespace, name) pairs, independent of their order."""
    hashes = sorted(pod_hash(namespace, name) for namespace, name in pods)
    digest = xxh64_hexdigest(b"".join(value.to_bytes(8, "little") for value in hashes))
    return f"{PREFIX}{VERSION}{digest}"


def fingerprint_pods(listed: Iterable[pb.PodResources], method: str,
                     published: Collection[str] | None = None) -> list[tuple[str, str]]:
    """(namespace, name) of the pods the kubelet listed that `method` covers.

    For METHOD_WITH_EXCLUSIVE_RESOURCES a pod counts when one of its containers holds exclusive CPUs, a
    memory block with NUMA affinity, or devices with NUMA affinity (of a resource in `published`, when
    given: the scheduler counts only device resources the NRT object names). That is the node-side rule of
    the reference exporter (resource-topology-exporter, numalocality.Verify). The scheduler decides from the
    pod spec instead: every Guaranteed pod counts (its memory request is exclusive there), so with the
    kubelet's CPU and Memory Managers not both static the two sides can disagree; METHOD_ALL has no such rule.
    """
    if method not in METHODS:
        raise ValueError(f"unknown fingerprint method {method!r} (known: {', '.join(METHODS)})")
    return [(pod.namespace, pod.name) for pod in listed
            if method == METHOD_ALL or _holds_exclusive(pod, published)]


def _holds_exclusive(pod: pb.PodResources, published: Collection[str] | None) -> bool:
    for container in pod.containers:
        if container.cpu_ids or any(_numa_bound(block.topology) for block in container.memory):
            return True
        if any(device.device_ids and _numa_bound(device.topology)
               and (published is None or device.resource_name in published) for device in container.devices):
            return True
    return False


def _numa_bound(topology: pb.TopologyInfo) -> bool:
    """No NUMA id, or only -1, means "no locality" (as resource-topology-exporter reads the PodResources API)."""
    return any(node.ID >= 0 for node in topology.nodes)
