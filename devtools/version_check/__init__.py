"""Every version images/versions.toml pins, checked to exist (`make check-versions`).

- `pins`: how each pin is checked (a Python package, a Go module, a version the serving image's
  wheel set must resolve to) or where it comes from when it cannot be checked here;
- `resolve`: the package clients (uv, go) asked about one pin, and the serving image's wheel set;
- `cli`: `python -m devtools.version_check`.
"""
