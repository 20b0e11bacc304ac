"""The one place that pins what the lab runs: the upstream Kubernetes release and the Go toolchain it needs.

The release is the newest 1.36 patch on the Go module proxy that builds with the machine's Go (its go.mod
asks for go 1.26.0) and still supports Debian 13's containerd 1.7 (support ends in 1.37).
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.36.3"
KUBERNETES_MODULE = "k8s.io/kubernetes"
# The component binaries numa-lab runs from an upstream release (kubectl is not needed on nodes), built
# together in one module so the packages they share compile once.
BINARIES = ("kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
# The oldest release the lab accepts: the kubelet flags numa-lab renders (--memory-manager-policy,
# --reserved-memory) first appeared in v1.21.
OLDEST_MINOR = 21
