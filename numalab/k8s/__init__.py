"""Where the Kubernetes binaries of a cluster come from: the pinned version, the Go module, builds, caches."""
