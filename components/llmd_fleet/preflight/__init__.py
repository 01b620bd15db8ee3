"""The fabric preflight: `probe` (self-contained, runs in the serving image and in
`make preflight-probe`) and the pure builders of the Job that runs it before serving
(llmd_fleet/serving/preflight.py)."""
