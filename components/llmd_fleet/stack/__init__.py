"""The whole stack: its configuration model (`model.py`), the registry of section owners that
derives its keys, rules and flow table (`registry.py`), the several-models form (`models.py`) and
parsing (`parse.py`). Above layers/ and targets/, which it imports; config/ stays below them."""
