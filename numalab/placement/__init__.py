"""What a pinned container should see, and whether it saw it: pure functions shared by the e2e suite, the lint
and the lab tests.

probe: the probe's output parsed; verdicts: that output judged against what the kubelet owed; pod_specs: QoS and
pinning rules over pod specs; api_objects: decisions over Nodes, Pods and a kubelet's /configz.
"""
