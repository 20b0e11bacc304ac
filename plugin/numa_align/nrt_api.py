"""Where NodeResourceTopology objects live in the Kubernetes API, and the annotation numa-align puts on them.

Named once here, in the plugin (numa-lab depends on it), for the plugin's client and objects, numalab's
`top`, CRD check and deploys, and the e2e and cluster tests. Facts of the CRD numa-lab installs
(github.com/k8stopologyawareschedwg/noderesourcetopology-api): cluster-scoped objects of group
topology.node.k8s.io, served and stored as v1alpha2. The templates in templates/ name them again in YAML.
"""

GROUP = "topology.node.k8s.io"
VERSION = "v1alpha2"
PLURAL = "noderesourcetopologies"
API_VERSION = f"{GROUP}/{VERSION}"
"""An object's apiVersion."""
CRD_NAME = f"{PLURAL}.{GROUP}"
"""The CRD's name; also how the API server's messages name the resource."""
ALLOCATIONS_ANNOTATION = "numa-align/allocations"
"""numa-align's annotation on its node's object: which pods hold which CPUs, memory and devices (JSON), for
people (`numalab top`); the scheduler does not read it."""
