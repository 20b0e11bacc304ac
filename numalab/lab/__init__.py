"""The KVM lab: NUMA-shaped libvirt guests brought up by a pyinfra connector."""
