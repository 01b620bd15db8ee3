"""Every rendered GKE and EKS cloud input against the clouds' own API models (`make check-cloud`).
docs/cloud-check.md lists every input and the API field it becomes; docs/verification.md says
what stays unchecked.

- `env`: botocore and google-api-python-client in their own virtualenv, built once into the user
  cache, keyed by the pinned versions (images/versions.toml [tools]); never part of the project's lock;
- `models`: the service models and discovery documents, and one value against one field;
- `tables`: the API field of every leaf input, per Pulumi resource type;
- `documented`: documented values of fields the models leave free strings;
- `check`: a rendered stack's cloud/*.yaml against the tables and models, and the negative controls;
- `docs`: docs/cloud-check.md, generated from the tables;
- `cli`: `python -m devtools.cloud_check [STACK...]`.
"""
