"""The pack's rules, one module per concern; modules starting with `_` are shared helpers."""
