"""Kind gke: a GKE Standard cluster with A3 Mega GPU pools on TCPXO, created by the stack."""
