"""Targets (type tokens `llmd-fleet:cluster:*`): on-prem, GKE and EKS clusters and GPU node pools."""
