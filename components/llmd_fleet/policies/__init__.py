"""The llmd-fleet CrossGuard policy pack, shipped inside the package.

`llmd-fleet policy-pack-path` prints this directory for
`pulumi preview --policy-pack "$(llmd-fleet policy-pack-path)"`; `llmd-fleet check` runs the same
pack offline. Rules live in `rules/`, one module per concern.
"""
