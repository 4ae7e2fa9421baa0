# The developer interface. `make run` and `make test` do all the set-up they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The stage `make smoke` tests (its stack JobRunner-$(STAGE)); URL=... tests that API instead (make run's).
STAGE ?= dev

.PHONY: help install run test unit lint format stop status clean chaos chaos-ops synth diff cdk-cli preflight runtime-check deploy smoke infra-test browser bench cluster cluster-stop cluster-status chaos-cluster soak

help:
	@echo "make run     - start Cassandra, Kafka, moto and the whole system locally (Ctrl-C to stop it)"
	@echo "make cluster - the same on a local cluster: 3 Cassandra nodes, 3 Kafka brokers (make cluster-stop stops it)"
	@echo "make test    - lint, then every test (unit, contract, integration, end-to-end) on real servers"
	@echo "make unit    - fast tests only (no servers)"
	@echo "make soak    - the model test's long random search (2,000 examples of 60 steps; no servers)"
	@echo "make lint    - ruff and mypy"
	@echo "make browser - the dashboard in headless Chromium against the local stack"
	@echo "make bench   - benchmarks against the real local servers (about 75 minutes); writes docs/benchmarks.md, bench/cost_inputs.json, the cost tables"
	@echo "make chaos   - both fault suites: crashes (5,000 executions, kills, restarts, silent minutes), then operations"
	@echo "make chaos-ops - the operations fault suite alone (PATCH, pause, resume, cancel racing the scans, a write outage)"
	@echo "make chaos-cluster - the cluster fault suite: nodes and brokers killed under load, on a cluster of its own"
	@echo "make synth   - synthesize the CDK app (and run cdk-nag) into cdk.out/, offline (CDK_ARGS=\"-c stage=prod\")"
	@echo "make diff    - cdk diff: what a deploy would change in the stage's stack (AWS credentials)"
	@echo "make preflight - check the account's Lambda concurrency quota against the stack (AWS credentials)"
	@echo "make runtime-check - import every handler on the Lambda runtime's Python (3.13) from the layers as shipped"
	@echo "make deploy  - preflight, runtime-check, then cdk deploy (context via CDK_ARGS=\"-c stage=prod\"); see docs/deploy.md"
	@echo "make smoke   - after a deploy: jobs through the stage's API, each step timed (STAGE=dev; URL=... for make run's)"
	@echo "make stop    - stop the local servers"
	@echo "make status  - which local servers are up"

$(STAMP): pyproject.toml client/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ./client -e '.[dev,otel]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m devstack.run

cluster: $(STAMP)
	$(PY) -m devstack.run --cluster

cluster-stop: $(STAMP)
	$(PY) -m devstack.cluster down

cluster-status: $(STAMP)
	$(PY) -m devstack.cluster status

# Lint runs beside the browser's and the servers' set-up (mypy on a fresh checkout takes about two minutes of one
# core, the servers' start mostly waits for their JVMs); the tests begin once both have succeeded.
test: $(STAMP)
	$(MAKE) --no-print-directory lint & lint=$$!; \
	$(PY) -m tests.browser.chromium && $(PY) -m devstack.servers up; up=$$?; \
	wait $$lint && test $$up -eq 0
	$(PY) -m pytest

unit: $(STAMP)
	$(PY) -m pytest tests/unit

soak: $(STAMP)
	JOBRUNNER_MODEL_EXAMPLES=2000 JOBRUNNER_MODEL_STEPS=60 $(PY) -m pytest tests/unit/jobrunner/model/test_scheduler_model.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy layers/jobrunner cql client devstack functions chaos infra examples bench

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

stop: $(STAMP)
	$(PY) -m devstack.servers down

status: $(STAMP)
	$(PY) -m devstack.servers status

clean: stop
	rm -rf .local/data .local/logs .local/run

# Both suites run even if the first fails; the target fails if either did.
chaos: $(STAMP)
	status=0; \
	$(PY) -m chaos --markdown docs/reliability-run.md || status=1; \
	$(PY) -m chaos --operations --markdown docs/reliability-operations-run.md || status=1; \
	exit $$status

chaos-ops: $(STAMP)
	$(PY) -m chaos --operations --markdown docs/reliability-operations-run.md

chaos-cluster: $(STAMP)
	$(PY) -m chaos --cluster --markdown docs/reliability-cluster-run.md

synth: $(STAMP)
	$(PY) -m infra.app $(CDK_ARGS)

diff: $(STAMP) cdk-cli
	infra/node_modules/.bin/cdk diff $(CDK_ARGS)

infra/node_modules/.bin/cdk: infra/package.json infra/package-lock.json
	npm ci --prefix infra --no-audit --no-fund
	touch $@

cdk-cli: infra/node_modules/.bin/cdk

preflight: $(STAMP)
	$(PY) -m infra.preflight $(CDK_ARGS)

# The functions run on python3.13 while the virtualenv may be 3.11: import every handler on the runtime's
# version, from the layers as they are shipped (its wheels, its bytecode). Needs python3.13 (docs/deploy.md).
runtime-check: $(STAMP)
	$(PY) -m infra.coldstart --runs 1

deploy: $(STAMP) cdk-cli preflight runtime-check
	infra/node_modules/.bin/cdk deploy $(CDK_ARGS)

# The last step of a deploy (docs/deploy.md, "The smoke test"): needs the example worker running against the stack.
smoke: $(STAMP)
	$(PY) -m infra.smoke $(if $(URL),--url $(URL),--stage $(STAGE))

infra-test: $(STAMP)
	$(PY) -m pytest tests/infra

browser: $(STAMP)
	$(PY) -m tests.browser.chromium
	$(PY) -m devstack.servers up
	$(PY) -m pytest tests/browser

# The run also writes the cost model's measured inputs (bench/cost_inputs.json); the second step regenerates
# docs/scaling.md's cost tables from them (tests/bench/test_cost.py fails while the two differ).
bench: $(STAMP)
	$(PY) -m devstack.servers up
	$(PY) -m bench
	$(PY) -m bench.cost --write-docs
