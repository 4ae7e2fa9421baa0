# The developer interface. `make run` and `make test` do all the set-up they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help install run test unit integration lint format stop status clean

help:
	@echo "make run     - start Cassandra, Kafka, moto and the whole system locally (Ctrl-C to stop it)"
	@echo "make test    - lint, then every test (unit, contract, integration, end-to-end) on real servers"
	@echo "make unit    - fast tests only (no servers)"
	@echo "make lint    - ruff and mypy"
	@echo "make stop    - stop the local servers"
	@echo "make status  - which local servers are up"

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m devstack.run

test: lint $(STAMP)
	$(PY) -m devstack.servers up
	$(PY) -m pytest

unit: $(STAMP)
	$(PY) -m pytest tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy layers/jobrunner devstack functions

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

stop: $(STAMP)
	$(PY) -m devstack.servers down

status: $(STAMP)
	$(PY) -m devstack.servers status

clean: stop
	rm -rf .local/data .local/logs .local/run
