"""The in-cluster layers, one folder each: serving, router, gateway, responses, autoscaling,
preflight, modelexpress, observability. A layer's folder owns what is about that layer alone; its
`flows.py` states the NetworkPolicy flows of its pods (pure), which
`llmd_fleet/security/isolation.py` unites for the serving namespace."""
