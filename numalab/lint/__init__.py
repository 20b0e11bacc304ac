"""`numalab lint`: say why a workload will not be pinned, before it is applied.

workloads.py finds the pod specs in manifests, rules.py holds one function per reason, command.py is
the subcommand.
"""
