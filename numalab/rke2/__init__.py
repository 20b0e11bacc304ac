"""RKE2 on the controller: the airgap artifact set checked against its sums file, and the join token."""
