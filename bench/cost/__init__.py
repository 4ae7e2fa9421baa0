"""The cost model of issue #33: what the stack costs per million executions and at rest, line by line.

``prices`` holds the dated unit prices, ``inputs`` the per-execution counts the benchmarks measure
(``bench/cost_inputs.json``), ``model`` the pure functions over both and a stage's configuration,
``docs`` the tables of docs/scaling.md generated from them; ``python -m bench.cost`` prints them.
"""
