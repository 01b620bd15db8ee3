"""The targets, one folder each: onprem, local, gke, eks. A target's folder owns its config
section and rules, its fabric facts, its cluster component and (for the clouds) its managed
database. The cloud halves (`gke/cluster.py`, `eks/cluster.py`, the databases) import their cloud
SDK and are imported only when the stack's kind is theirs."""
