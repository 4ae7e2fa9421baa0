"""The CDK app that deploys the Distributed Job Runner (``cdk deploy``; entry point ``infra.app``).

- ``config``: the context keys of ``cdk.json`` and their defaults
- ``cql_schema``: ``cql/*.cql`` parsed into table specs (the Keyspaces tables are derived from them) and
  the Keyspaces compatibility rules
- ``layer_build``: the dependency layer (``pip install --platform ...``, no Docker) and the code layer
- ``constructs/``: one construct per unit; ``stack``: composes them, grants, outputs
"""
