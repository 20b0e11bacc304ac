"""`numalab top` / `kubectl numa`: each node's NUMA cells, their CPUs and memory, and the pods holding them.

Read through the API only (NodeResourceTopology objects, Nodes, Pods), so it works wherever a kubeconfig
does. The layers: `nrt` parses one object, `model` joins it with Nodes and Pods into per-node views (pure),
`text`/`svg`/`page` render them, `source` talks to the API, `command` is the CLI.
"""
