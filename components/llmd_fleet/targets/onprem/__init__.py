"""Kind onprem: an existing Kubernetes cluster reached through a kubeconfig."""
