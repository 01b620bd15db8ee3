"""Reading a cluster: one hardened client (client.py) for `status`, `doctor` and whatever reads a
cluster next."""
