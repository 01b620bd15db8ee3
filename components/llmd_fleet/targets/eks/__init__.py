"""Kind eks: an EKS cluster with p5.48xlarge GPU node groups on EFA, created by the stack."""
