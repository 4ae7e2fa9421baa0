"""The smoke test a user runs after a deploy: ``python -m infra.smoke --stage dev`` (``make smoke``), or against any
API with ``--url`` (the local stack: ``make smoke URL=http://127.0.0.1:8080``; ``make test`` runs it there).

It submits a one-time job a few seconds ahead, a job every minute, a job it runs now, a job it changes, pauses
and resumes, a job that fails once then succeeds, and one that always fails (dead-lettered), then follows each
through the API's history and firing ledger, prints each step with its time, cancels what it left standing,
and exits 1 when any step failed. The executions are run by the example worker (``examples/worker.py``), which
the local stack runs itself; against AWS start it as docs/deploy.md says.

- ``target``: where the API is (a stage's stack outputs and SigV4, or a URL and a bearer token)
- ``steps``: the jobs and what is checked of each
- ``runner``: steps run in phases, concurrently within a phase, with an injected clock
- ``report``: what is printed
- ``cli``: the command
"""
