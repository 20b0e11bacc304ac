"""`numalab explain`: the admission verdict a node's kubelet would give a pod, predicted from API data only."""
