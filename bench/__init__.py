"""The benchmark harness: ``python -m bench`` (``make bench``) measures the scheduler against the real
local Cassandra, Kafka and moto and writes ``docs/benchmarks.md`` and ``docs/benchmarks.png``."""
