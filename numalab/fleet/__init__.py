"""The fleet-scale simulation: a native control plane on loopback with kwok nodes (issue 28)."""
