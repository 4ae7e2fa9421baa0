"""Distributed Job Runner: a serverless, fault-tolerant job scheduler for AWS.

Layout (read top-down):
- ``domain``: pure values and rules (jobs, schedules, minute buckets, segments, states).
- ``ports``: the interfaces the services need, with their contracts.
- ``services``: the use cases (submit, tick, scan); pure, driven through ports.
- ``adapters``: implementations of the ports (memory, Cassandra, Kafka, DynamoDB, Lambda).
- ``api``: the HTTP surface (Powertools resolver) over the services.
- ``wiring``: builds services from configuration for Lambda and the local stack.
"""
