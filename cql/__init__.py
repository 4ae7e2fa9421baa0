"""The schema and its build-time tools: ``*.cql`` (applied in file-name order), ``schema`` (the CQL parser
infra derives the Keyspaces tables from), ``migrate`` (``python -m cql.migrate`` applies the schema and carries the
data over) and ``kept_jobs`` (its step for one-time jobs' rows an older release wrote without a time to live).

Not part of the Lambda runtime: no function imports this package, and the code layer does not ship it.
"""
