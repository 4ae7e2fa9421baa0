"""The CDK app that deploys the Distributed Job Runner (``cdk deploy``; entry point ``infra.app``).

- ``config``: the context keys of ``cdk.json`` and their defaults
- ``layer_build``: the dependency layer (``pip install --platform ...``, no Docker) and the code layer
- ``constructs/``: one construct per unit; ``stack``: composes them, grants, outputs

The Keyspaces tables are derived from ``cql/*.cql`` by ``cql.schema`` (the parser, with the Keyspaces
compatibility rules).
"""
