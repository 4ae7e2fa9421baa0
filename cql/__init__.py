"""The schema and its build-time tools: ``*.cql`` (applied in file-name order), ``schema`` (the CQL parser
infra derives the Keyspaces tables from) and ``migrate`` (``python -m cql.migrate`` applies the schema).

Not part of the Lambda runtime: no function imports this package, and the code layer does not ship it.
"""
