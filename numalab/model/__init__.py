"""The pure-Python model: topology, quantities, kubelet policy, RKE2 settings. No I/O lives here."""
